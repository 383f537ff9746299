//! A bench side in a process of its own: this binary again, told by an
//! environment variable which side to run.

/// Runs this binary with `variable` = `job`, its standard error inherited,
/// and waits for it; its standard output is read to the end as the child
/// writes it, so the pipe it writes to never fills.
pub async fn run(variable: &'static str, job: String) -> std::io::Result<std::process::Output> {
    let exe = std::env::current_exe()?;
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(exe)
            .env(variable, job)
            .stderr(std::process::Stdio::inherit())
            .output()
    })
    .await
    .expect("the child's task")
}
