//! How many of the machine's cores sat idle: the network threads' balancer samples it every
//! 500 ms before it tries one thread more for an interactive load (`network_threads.rs`). Read
//! from the kernel's CPU times (`/proc/stat`, Linux); elsewhere, or when that file cannot be
//! read or parsed, the idle cores are unknown and the balancer probes as if cores were idle.

/// The machine's CPU times, in the kernel's ticks, since it booted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTimes {
    /// Idle and waiting for I/O, over every core.
    idle: u64,
    /// Every state but the guests' (already counted in user time), over every core.
    total: u64,
    /// The cores counted.
    cores: u32,
}

impl CpuTimes {
    /// The times now, or `None` where they cannot be read.
    pub fn now() -> Option<CpuTimes> {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| CpuTimes::parse(&text))
    }

    /// The times in `/proc/stat`'s text: its first line sums every core
    /// (`cpu user nice system idle iowait irq softirq steal guest guest_nice`), and a `cpuN`
    /// line follows for each core.
    fn parse(text: &str) -> Option<CpuTimes> {
        let mut lines = text.lines();
        let mut fields = lines.next()?.split_ascii_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let times: Vec<u64> = fields
            .take(8)
            .map(|field| field.parse().ok())
            .collect::<Option<_>>()?;
        // Kernels before 2.6.11 stop before steal; those fields then count as zero.
        if times.len() < 4 {
            return None;
        }
        let time = |index: usize| times.get(index).copied().unwrap_or(0);
        let cores = lines
            .take_while(|line| line.starts_with("cpu"))
            .filter(|line| line.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count();
        Some(CpuTimes {
            idle: time(3) + time(4),
            total: times.iter().sum(),
            cores: u32::try_from(cores).ok().filter(|&cores| cores > 0)?,
        })
    }

    /// The cores idle on average from `before` to these times, or `None` if no time passed.
    pub fn idle_cores_since(self, before: CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(before.total).filter(|&t| t > 0)?;
        let idle = self.idle.checked_sub(before.idle)?;
        Some(idle as f64 / total as f64 * f64::from(self.cores))
    }
}

/// Samples of the machine's idle cores, each measured from the last sample that could be read:
/// a read that fails (a file briefly unreadable) loses its own sample, not every one after it.
#[derive(Default)]
pub struct IdleSampler {
    last: Option<CpuTimes>,
}

impl IdleSampler {
    /// Takes `now` (the times read now, `None` if they could not be) as a sample: the cores idle
    /// on average since the last good one, unknown without both.
    pub fn sample(&mut self, now: Option<CpuTimes>) -> Option<f64> {
        let idle = match (self.last, now) {
            (Some(before), Some(now)) => now.idle_cores_since(before),
            _ => None,
        };
        self.last = now.or(self.last);
        idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  3525457 0 823262 2406171 183686 0 156895 8334 0 0\n\
                        cpu0 1582594 0 382154 1453386 63678 0 67049 4169 0 0\n\
                        cpu1 1942863 0 441107 952785 120007 0 89846 4165 0 0\n\
                        intr 1 2 3\n\
                        ctxt 42\n";

    #[test]
    fn the_idle_cores_are_the_idle_share_of_the_time_passed_times_the_cores() {
        let before = CpuTimes::parse(STAT).unwrap();
        assert_eq!(
            before,
            CpuTimes {
                idle: 2406171 + 183686,
                total: 3525457 + 823262 + 2406171 + 183686 + 156895 + 8334,
                cores: 2,
            }
        );
        // 100 ticks pass over the two cores, 25 of them idle or waiting: half a core idle.
        let after = CpuTimes {
            idle: before.idle + 20,
            total: before.total + 100,
            ..before
        };
        let after = CpuTimes {
            idle: after.idle + 5,
            ..after
        };
        assert_eq!(after.idle_cores_since(before), Some(0.5));
        assert_eq!(before.idle_cores_since(before), None, "no time passed");
        assert_eq!(before.idle_cores_since(after), None, "time ran backwards");
    }

    #[test]
    fn a_failed_read_loses_its_own_sample_and_the_next_measures_from_the_last_good_one() {
        let at = |idle: u64, total: u64| CpuTimes {
            idle,
            total,
            cores: 2,
        };
        let mut sampler = IdleSampler::default();
        assert_eq!(sampler.sample(None), None, "nothing read yet");
        assert_eq!(
            sampler.sample(Some(at(0, 0))),
            None,
            "the first sample has no before"
        );
        assert_eq!(sampler.sample(Some(at(50, 100))), Some(1.0));
        assert_eq!(sampler.sample(None), None, "unreadable now");
        // Measured from the last good sample (50, 100), across the failed read.
        assert_eq!(sampler.sample(Some(at(75, 200))), Some(0.5));
        assert_eq!(sampler.sample(Some(at(75, 300))), Some(0.0));
    }

    #[test]
    fn text_that_is_not_the_kernels_cpu_times_reads_as_unknown() {
        for text in [
            "",
            "intr 1 2 3\n",
            "cpu  1 2 3\ncpu0 1 2 3 4\n",
            "cpu  1 2 x 4\ncpu0 1 2 3 4\n",
            "cpu  1 2 3 4 5\nintr 1\n",
        ] {
            assert_eq!(CpuTimes::parse(text), None, "{text:?}");
        }
        let old_kernel = CpuTimes::parse("cpu  1 2 3 4\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            (old_kernel.idle, old_kernel.total, old_kernel.cores),
            (4, 10, 1)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machine_reports_its_cores() {
        let times = CpuTimes::now().expect("/proc/stat read");
        assert!(times.cores >= 1 && times.idle <= times.total, "{times:?}");
    }
}
