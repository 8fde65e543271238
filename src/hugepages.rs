//! Transparent huge pages for the index's memory, once it is in place.
//!
//! **Why.** A query by id is a chain of dependent reads at random places
//! in ~1.5 GB (at 1,000,000 documents): the id map's control bytes and
//! entry, the id, the slot, the record, and for a quarter of the documents
//! the band tables and the candidates' shingles. With 4 KiB pages each of
//! those reads also misses the TLB, whose ~3,000 entries cover 12 MiB, and
//! walks the page table, whose entries for 1.5 GB (3 MB) are themselves
//! mostly out of cache. With 2 MiB pages the same TLB covers 6 GiB. On the
//! 1M articles index (docs/benchmarks.md, round 16) the engine's query by
//! id took 2,428 / 2,520 ns instead of 3,264 / 2,946 (`examples/query_bench
//! --huge-pages`, two alternating runs): 15–25% less.
//!
//! **How.** The index is allocated by two allocators (`allocator.rs`):
//! mimalloc's segments and glibc's arenas, which grow their heaps a few
//! pages at a time. Neither can be asked for huge pages (mimalloc is built
//! without them, as they slowed fresh ingests; glibc's arenas ignore its
//! `hugetlb` tunable), and most systems ship THP in `madvise` mode, so by
//! default the index gets none. After the restore, and then every
//! `storage.huge_pages_interval_secs`, a pass reads `/proc/self/maps` and,
//! in each private anonymous read-write mapping, asks the kernel to
//! collapse every aligned 2 MiB range whose 512 pages are all resident
//! (`mincore`) into one huge page (`madvise(MADV_COLLAPSE)`, Linux 6.1 and
//! later; it works in `madvise` mode, not in `never`). Ranges not wholly
//! resident are left alone, so a pass never makes memory resident that was
//! not: RSS stays as it was. A collapse copies the range into a fresh huge
//! page with the contents unchanged (the kernel keeps concurrent readers
//! and writers correct); a range already collapsed costs a system call.
//!
//! **Cost.** On this 2-core VM the first pass over the restored 1M index
//! collapsed 1.44 GB in 3.1 s of one thread's time in the kernel, off the
//! async workers (a C program collapsing 512 MiB took 0.13–1.27 s, in one
//! call or a call per range alike); an idle pass takes ~2 ms, and later
//! passes only collapse what grew since.
//!
//! A pass waits while resident memory grows fast (a bulk load), for at
//! most a few ticks: see [`Schedule`].
//!
//! Linux only; elsewhere, and where the kernel refuses (`EINVAL`: too old,
//! or THP set to `never`; `EPERM` / `ENOSYS`: a seccomp filter), a pass
//! reports [`Unsupported`] and the server stops asking.
#![allow(unsafe_code)]

use std::fmt;

/// A huge page, and the alignment and length of the ranges collapsed.
pub const HUGE_PAGE: usize = 2 << 20;

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Mappings looked at (private, anonymous, read-write, ≥ one huge page).
    pub mappings: usize,
    /// 2 MiB ranges wholly resident, so asked to collapse.
    pub ranges: usize,
    /// Of those, the ranges the kernel could not collapse now (no free huge
    /// page, or pages busy); the next pass tries them again.
    pub failed: usize,
}

impl Pass {
    /// Bytes now in huge pages among the ranges asked (already huge ones
    /// included).
    pub fn collapsed_bytes(&self) -> u64 {
        ((self.ranges - self.failed) * HUGE_PAGE) as u64
    }
}

/// The kernel cannot collapse memory into huge pages here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unsupported {}

/// One mapping of `/proc/self/maps` worth collapsing: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: usize,
    pub end: usize,
}

/// The private anonymous read-write mappings of a `/proc/PID/maps` text,
/// at least one aligned huge page long. Named mappings (`[stack]`,
/// `[vdso]`, files) are skipped, except `[heap]` (glibc's main arena).
pub fn anonymous_mappings(maps: &str) -> Vec<Mapping> {
    maps.lines()
        .filter_map(|line| {
            // "start-end perms offset dev inode [path]"
            let mut f = line.split_ascii_whitespace();
            let (range, perms) = (f.next()?, f.next()?);
            let (_offset, _dev, inode) = (f.next()?, f.next()?, f.next()?);
            let path = f.next();
            if perms != "rw-p" || inode != "0" || !matches!(path, None | Some("[heap]")) {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            let m = Mapping { start, end };
            (!m.huge_ranges().is_empty()).then_some(m)
        })
        .collect()
}

impl Mapping {
    /// The aligned 2 MiB ranges inside the mapping, as range numbers
    /// (start address ÷ [`HUGE_PAGE`]).
    pub fn huge_ranges(&self) -> std::ops::Range<usize> {
        let first = self.start.div_ceil(HUGE_PAGE);
        let last = self.end / HUGE_PAGE;
        first..last.max(first)
    }
}

/// Collapse every wholly resident aligned 2 MiB range of the process's
/// anonymous memory into a huge page (module docs).
pub fn collapse_resident() -> Result<Pass, Unsupported> {
    #[cfg(target_os = "linux")]
    {
        let maps = std::fs::read_to_string("/proc/self/maps")
            .map_err(|e| Unsupported(format!("cannot read /proc/self/maps: {e}")))?;
        let mappings = anonymous_mappings(&maps);
        let mut pass = Pass {
            mappings: mappings.len(),
            ..Pass::default()
        };
        let mut residency = vec![0u8; HUGE_PAGE / page_size()];
        for m in &mappings {
            for huge in m.huge_ranges() {
                let addr = huge * HUGE_PAGE;
                if !linux::resident(addr, &mut residency) {
                    continue;
                }
                pass.ranges += 1;
                match linux::collapse(addr) {
                    Ok(()) => {}
                    Err(linux::Refused::Now) => pass.failed += 1,
                    Err(linux::Refused::Always(why)) => return Err(Unsupported(why)),
                }
            }
        }
        Ok(pass)
    }
    #[cfg(not(target_os = "linux"))]
    Err(Unsupported("huge page collapse is Linux-only".into()))
}

/// The process's resident memory now (`/proc/self/statm`), if the kernel
/// says (also the `process_resident_memory_bytes` metric).
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_ascii_whitespace().nth(1)?.parse().ok()?;
    #[cfg(target_os = "linux")]
    return Some(pages * page_size() as u64);
    #[cfg(not(target_os = "linux"))]
    Some(pages * 4096)
}

/// When a pass is due, given how much the process grew since the last tick.
///
/// A pass over memory that is still being filled (a bulk load) pays to
/// collapse ranges that the next pass would collapse anyway, and takes
/// kernel time from the load itself: measured in `scripts/bench.sh`, a
/// 1M-document ingest with a pass every 10 s ran at 97k–135k docs/s,
/// against 124k–151k in the runs before the pass existed
/// (docs/benchmarks.md, round 16). So a pass
/// waits while resident memory grows by more than [`GROWING`] a tick, for
/// at most [`MAX_DEFERRED`] ticks in a row (a steady heavy ingest still
/// gets its pages collapsed once in a while).
#[derive(Debug, Default)]
pub struct Schedule {
    last_rss: Option<u64>,
    deferred: u32,
}

/// Growth of resident memory between two ticks that defers a pass.
pub const GROWING: u64 = 64 << 20;
/// Ticks a pass may be deferred in a row.
pub const MAX_DEFERRED: u32 = 5;

impl Schedule {
    /// At a tick with the process at `rss` bytes: whether to run a pass
    /// now. The first tick always runs one (right after the restore).
    pub fn due(&mut self, rss: u64) -> bool {
        let growing = self
            .last_rss
            .is_some_and(|last| rss.saturating_sub(last) > GROWING);
        self.last_rss = Some(rss);
        if growing && self.deferred < MAX_DEFERRED {
            self.deferred += 1;
            return false;
        }
        self.deferred = 0;
        true
    }
}

/// The process's anonymous memory in transparent huge pages now
/// (`AnonHugePages` of `/proc/self/smaps_rollup`), if the kernel says.
pub fn huge_page_bytes() -> Option<u64> {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    anon_huge_pages(&rollup)
}

/// `AnonHugePages` of a `smaps_rollup` text (this process's or another's),
/// in bytes.
pub fn anon_huge_pages(rollup: &str) -> Option<u64> {
    let line = rollup.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    let kb: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(target_os = "linux")]
fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096).max(1)
}

#[cfg(target_os = "linux")]
mod linux {
    use super::HUGE_PAGE;
    use std::io;

    /// Why a range was not collapsed.
    pub enum Refused {
        /// Not now (no free huge page, pages locked or busy, unmapped meanwhile).
        Now,
        /// Never on this kernel or with its THP setting.
        Always(String),
    }

    /// Whether all pages of the 2 MiB range at `addr` are resident
    /// (`residency`: one byte a page). False if the range is no longer mapped.
    pub fn resident(addr: usize, residency: &mut [u8]) -> bool {
        // SAFETY: `mincore` writes one byte per page of the range into
        // `residency`, which has `HUGE_PAGE / page size` bytes; it reads no
        // memory of the range itself. An address no longer mapped (another
        // thread unmapped it since /proc/self/maps was read) gives ENOMEM.
        let r = unsafe {
            libc::mincore(
                addr as *mut libc::c_void,
                HUGE_PAGE,
                residency.as_mut_ptr().cast(),
            )
        };
        r == 0 && residency.iter().all(|&b| b & 1 == 1)
    }

    /// Ask the kernel to collapse the 2 MiB range at `addr` into a huge page.
    pub fn collapse(addr: usize) -> Result<(), Refused> {
        // SAFETY: MADV_COLLAPSE neither changes the contents of the range
        // nor its mapping as the program sees it (the kernel copies the
        // pages into a huge page under its own locks, concurrent access
        // stays correct); a range unmapped meanwhile gives ENOMEM. Nothing
        // in this process relies on the page size of its anonymous memory.
        let r = unsafe { libc::madvise(addr as *mut libc::c_void, HUGE_PAGE, libc::MADV_COLLAPSE) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // EINVAL: no MADV_COLLAPSE (before Linux 6.1) or THP `never`;
            // EPERM / ENOSYS: a seccomp filter (a container's) refuses it.
            Some(libc::EINVAL | libc::EPERM | libc::ENOSYS) => Err(Refused::Always(format!(
                "the kernel does not collapse memory into huge pages here (MADV_COLLAPSE needs Linux 6.1 or later, transparent huge pages not set to never, and no seccomp filter refusing it): {e}"
            ))),
            _ => Err(Refused::Now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d1c0a00000-55d1c0c00000 r--p 00000000 08:01 131 /usr/bin/neardup
55d1c2000000-55d1c2800000 rw-p 00000000 00:00 0 [heap]
20000000000-20040000000 rw-p 00000000 00:00 0 
7f29cc000000-7f29cc1ff000 rw-p 00000000 00:00 0 
7f29cc1ff000-7f29d0000000 ---p 00000000 00:00 0 
7f29d4000000-7f29d4401000 rw-p 00000000 00:00 0 
7f29d5000000-7f29d5800000 rw-s 00000000 00:01 7 /dev/zero (deleted)
7f29d6000000-7f29d6800000 rw-p 00000000 08:01 99 /data/snapshot.bin
7ffd1c000000-7ffd1c400000 rw-p 00000000 00:00 0 [stack]
";

    #[test]
    fn only_private_anonymous_rw_mappings_with_a_whole_huge_page_count() {
        let m = anonymous_mappings(MAPS);
        assert_eq!(
            m,
            vec![
                Mapping { start: 0x55d1c2000000, end: 0x55d1c2800000 },
                Mapping { start: 0x20000000000, end: 0x20040000000 },
                Mapping { start: 0x7f29d4000000, end: 0x7f29d4401000 },
            ],
            "the 2 MiB - 4 KiB mapping, the PROT_NONE reserve, shared, file-backed and stack mappings are skipped"
        );
        // [heap]: 8 MiB from an aligned start: 4 ranges.
        assert_eq!(m[0].huge_ranges().len(), 4);
        // 1 GiB: 512 ranges.
        assert_eq!(m[1].huge_ranges().len(), 512);
        // 4 MiB + 4 KiB from an aligned start: 2 whole ranges.
        assert_eq!(
            m[2].huge_ranges(),
            0x7f29d4000000 / HUGE_PAGE..0x7f29d4400000 / HUGE_PAGE
        );
    }

    #[test]
    fn an_unaligned_mapping_keeps_only_its_whole_aligned_ranges() {
        let m = Mapping {
            start: HUGE_PAGE + 4096,
            end: 4 * HUGE_PAGE - 4096,
        };
        assert_eq!(m.huge_ranges(), 2..3);
        let short = Mapping {
            start: HUGE_PAGE + 4096,
            end: 2 * HUGE_PAGE + 4096,
        };
        assert!(short.huge_ranges().is_empty());
    }

    #[test]
    fn the_rollup_gives_anon_huge_pages_in_bytes() {
        let rollup = "55d1c0a00000-7ffd1c400000 ---p 00000000 00:00 0 [rollup]\n\
                      Rss:             1465888 kB\n\
                      AnonHugePages:   1406976 kB\n\
                      ShmemPmdMapped:        0 kB\n";
        assert_eq!(anon_huge_pages(rollup), Some(1406976 * 1024));
        assert_eq!(anon_huge_pages("Rss: 1 kB\n"), None);
    }

    #[test]
    fn a_pass_waits_while_memory_grows_but_not_forever() {
        let mut s = Schedule::default();
        let mib = 1 << 20;
        assert!(s.due(100 * mib), "the first tick runs");
        assert!(s.due(150 * mib), "+50 MiB is not growing");
        // A bulk load: +100 MiB a tick defers, MAX_DEFERRED times in a row.
        let mut rss = 150 * mib;
        for _ in 0..MAX_DEFERRED {
            rss += 100 * mib;
            assert!(!s.due(rss));
        }
        rss += 100 * mib;
        assert!(s.due(rss), "then one runs anyway");
        rss += 100 * mib;
        assert!(!s.due(rss), "and the count starts again");
        // The load ends: the next tick runs.
        assert!(s.due(rss));
        // Shrinking never defers.
        assert!(s.due(rss - 500 * mib));
    }

    #[test]
    fn resident_bytes_come_from_statm() {
        let rss = resident_bytes().expect("statm");
        assert!(rss > 1 << 20, "{rss}");
    }

    /// A real pass over this test process: whatever the kernel does, the
    /// memory's contents stay as they were, and a touched 8 MiB block is
    /// counted among the ranges asked unless the kernel refuses outright.
    #[test]
    fn a_pass_keeps_contents_and_counts_a_resident_block() {
        let mut block: Vec<u64> = (0..(8 << 20) / 8).map(|i| i * 0x9e37_79b9).collect();
        let sum: u64 = block.iter().fold(0, |a, &x| a.wrapping_add(x));
        match collapse_resident() {
            Ok(pass) => {
                assert!(huge_page_bytes().is_some());
                assert!(pass.mappings >= 1, "{pass:?}");
                // The block spans at least 3 whole aligned ranges, all touched.
                assert!(pass.ranges >= 3, "{pass:?}");
                assert!(pass.failed <= pass.ranges);
            }
            Err(Unsupported(why)) => eprintln!("huge pages unsupported here: {why}"),
        }
        block[17] = block[17].wrapping_add(1);
        let after: u64 = block.iter().fold(0, |a, &x| a.wrapping_add(x));
        assert_eq!(after, sum.wrapping_add(1));
    }
}
