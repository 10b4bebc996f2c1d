/*
 * autopin_spank.c — a SPANK plugin that adds `srun --autopin[=OPTIONS]` (and `#SBATCH
 * --autopin`, which reaches the job's steps through Slurm's option environment) and runs
 * every task of the step as `autopin run [OPTIONS] -- <task argv>`.
 *
 * plugstack.conf:
 *     optional /usr/lib/slurm/autopin_spank.so autopin=/usr/bin/autopin
 *
 * Arguments in plugstack.conf:
 *     autopin=PATH    the autopin binary on the compute nodes (required)
 *     options=OPTS    options used when --autopin is given without a value (default none);
 *                     spaces are written as commas here, since plugstack.conf splits on spaces
 *
 * OPTIONS (after --autopin=) are split on white space; single and double quotes group.
 * Only job steps are wrapped: the batch script, the extern step and interactive steps run
 * as they are.
 *
 * The task is replaced in slurm_spank_task_init, the last hook before Slurm's own execve:
 * by then slurmstepd has applied the step's CPU binding, cgroup and environment, so autopin
 * starts inside exactly what Slurm gave the task and never widens it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(autopin, 1);

#define MAX_OPTION_WORDS 256

static int wanted;           /* --autopin was given */
static char *user_options;   /* its value, NULL when given without one */
static char *autopin_path;   /* autopin=PATH from plugstack.conf */
static char *default_options; /* options=OPTS from plugstack.conf */

static int option_cb(int val, const char *optarg, int remote);

static struct spank_option autopin_option = {
    "autopin",
    "OPTIONS",
    "Run each task under `autopin run [OPTIONS] -- TASK`: coordinated, topology-aware thread "
    "pinning (OPTIONS as for `autopin run`, space separated; quote the whole value).",
    2, /* the value is optional */
    0,
    option_cb,
};

static int option_cb(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    wanted = 1;
    free(user_options);
    user_options = (optarg && *optarg) ? strdup(optarg) : NULL;
    return 0;
}

/* Reads autopin=PATH and options=OPTS; anything else is an error that names the argument. */
static int parse_plugin_args(int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        if (strncmp(av[i], "autopin=", 8) == 0) {
            free(autopin_path);
            autopin_path = strdup(av[i] + 8);
        } else if (strncmp(av[i], "options=", 8) == 0) {
            free(default_options);
            default_options = strdup(av[i] + 8);
            for (char *c = default_options; *c; c++)
                if (*c == ',')
                    *c = ' ';
        } else {
            slurm_error("autopin: unknown plugstack.conf argument '%s' "
                        "(valid: autopin=PATH, options=OPTS)", av[i]);
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (parse_plugin_args(ac, av) < 0)
        return -1;
    return spank_option_register(sp, &autopin_option) == ESPANK_SUCCESS ? 0 : -1;
}

/*
 * Splits `text` into words (white space separates; '...' and "..." group) and appends them
 * to `out` from index *n on. Returns -1 with a message on an unclosed quote or too many
 * words.
 */
static int split_words(const char *text, char **out, int *n, int max)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *word = malloc(strlen(p) + 1);
        char *w = word;
        if (!word)
            return -1;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
            if (*p == '\'' || *p == '"') {
                char q = *p;
                const char *open = p++;
                while (*p && *p != q)
                    *w++ = *p++;
                if (*p != q) {
                    slurm_error("autopin: unclosed %c at position %ld of --autopin='%s'", q,
                                (long)(open - text) + 1, text);
                    free(word);
                    return -1;
                }
                p++;
            } else {
                *w++ = *p++;
            }
        }
        *w = '\0';
        if (*n >= max) {
            slurm_error("autopin: more than %d words in --autopin='%s'", max, text);
            free(word);
            return -1;
        }
        out[(*n)++] = word;
    }
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!wanted || !spank_remote(sp))
        return 0;

    uint32_t step = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step > SLURM_MAX_NORMAL_STEP_ID)
        return 0; /* batch script, extern or interactive step */

    if (!autopin_path || !*autopin_path) {
        slurm_error("autopin: --autopin needs the autopin binary: add autopin=PATH to this "
                    "plugin's line in plugstack.conf");
        return -1;
    }
    if (access(autopin_path, X_OK) != 0) {
        slurm_error("autopin: cannot run %s (autopin= in plugstack.conf): %s", autopin_path,
                    strerror(errno));
        return -1;
    }

    int task_argc = 0;
    char **task_argv = NULL;
    char **env = NULL;
    if (spank_get_item(sp, S_JOB_ARGV, &task_argc, &task_argv) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || task_argc < 1) {
        slurm_error("autopin: cannot read the task's command line or environment");
        return -1;
    }

    int max = task_argc + MAX_OPTION_WORDS + 4;
    char **argv = calloc((size_t)max + 1, sizeof(char *));
    if (!argv)
        return -1;
    int n = 0;
    argv[n++] = autopin_path;
    argv[n++] = "run";
    const char *opts = user_options ? user_options : default_options;
    if (opts && split_words(opts, argv, &n, max - task_argc - 1) < 0)
        return -1;
    argv[n++] = "--";
    for (int i = 0; i < task_argc; i++)
        argv[n++] = task_argv[i];
    argv[n] = NULL;

    execve(autopin_path, argv, env);
    slurm_error("autopin: execve %s failed: %s", autopin_path, strerror(errno));
    return -1;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    free(user_options);
    free(autopin_path);
    free(default_options);
    user_options = autopin_path = default_options = NULL;
    return 0;
}
