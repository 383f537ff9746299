use serde::Serialize;

/// `value` as the command's `--json` output: pretty-printed, on standard
/// output.
pub fn print(value: &impl Serialize) -> Result<(), String> {
    println!("{}", to_text(value)?);
    Ok(())
}

/// `value` as pretty-printed JSON text.
pub fn to_text(value: &impl Serialize) -> Result<String, String> {
    serde_json::to_string_pretty(value).map_err(|e| e.to_string())
}
