//! What `/proc` tells about a process the tests started: resident memory and open files.

/// VmRSS of process `pid` in MB, and its number of open file descriptors (0, 0 when it is gone).
pub fn rss_mb_and_fds(pid: u32) -> (f64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss_kb / 1024.0, fds)
}
