//! dot view.

use crate::model::Machine;

pub fn render(_m: &Machine) -> String {
    String::new()
}
