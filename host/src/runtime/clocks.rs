//! The clocks a timing ran at: the SM clock, board power and clock-event reasons of the
//! device, sampled through NVML (`libnvidia-ml.so.1`, loaded at run time) on a thread while
//! a benchmark runs.
//!
//! Why: a long GeMM run on these H100s and H200s sits under the board's power cap (session 35
//! measured an H100 at 1 395–1 455 MHz instead of 1 980 while `run layers` ran, with the SW
//! power cap active), so two variants timed side by side may run at different clocks, and a
//! ratio is then partly a ratio of clocks. The benchmarks print the clocks beside their times.
//!
//! Nothing here is needed for a result: without NVML (no driver, a container without the
//! library, a device NVML does not list) [`ClockSampler::start`] says why and the benchmarks
//! print their times without clocks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Context;

/// `nvmlClocksEventReasonSwPowerCap`: the clocks are held down to stay under the power cap.
pub const REASON_SW_POWER_CAP: u64 = 0x4;
/// `nvmlClocksEventReasonHwSlowdown`, `SwThermalSlowdown`, `HwThermalSlowdown` and
/// `HwPowerBrakeSlowdown`: thermal or hardware slowdowns.
pub const REASONS_THERMAL_OR_HW: u64 = 0x8 | 0x20 | 0x40 | 0x80;

/// One reading of the device's clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSample {
    /// When it was read (host clock).
    pub at: Instant,
    /// SM clock, MHz.
    pub sm_mhz: u32,
    /// Board power, milliwatts (NVML's reading, averaged by the driver over up to a second).
    pub power_mw: u32,
    /// The active clock-event reasons (NVML's bit mask; 0 where NVML could not say).
    pub reasons: u64,
}

/// A summary of samples: what a timing's clocks were.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockStats {
    /// Samples summarized.
    pub samples: usize,
    /// Lowest SM clock, MHz.
    pub sm_mhz_min: u32,
    /// Median SM clock, MHz.
    pub sm_mhz_median: u32,
    /// Highest SM clock, MHz.
    pub sm_mhz_max: u32,
    /// Mean SM clock, MHz.
    pub sm_mhz_mean: f64,
    /// Highest board power, watts.
    pub power_w_max: f64,
    /// Fraction of samples under the power cap ([`REASON_SW_POWER_CAP`]).
    pub power_capped: f64,
    /// Fraction of samples with a thermal or hardware slowdown ([`REASONS_THERMAL_OR_HW`]).
    pub thermal_or_hw: f64,
}

impl ClockStats {
    /// The summary of `samples`; `None` for none.
    pub fn of(samples: &[ClockSample]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut mhz: Vec<u32> = samples.iter().map(|s| s.sm_mhz).collect();
        mhz.sort_unstable();
        let n = samples.len();
        let share = |mask: u64| samples.iter().filter(|s| s.reasons & mask != 0).count() as f64 / n as f64;
        Some(ClockStats {
            samples: n,
            sm_mhz_min: mhz[0],
            sm_mhz_median: mhz[(n - 1) / 2],
            sm_mhz_max: mhz[n - 1],
            sm_mhz_mean: mhz.iter().map(|&m| f64::from(m)).sum::<f64>() / n as f64,
            power_w_max: samples
                .iter()
                .map(|s| s.power_mw)
                .max()
                .map_or(0.0, |p| f64::from(p) / 1000.0),
            power_capped: share(REASON_SW_POWER_CAP),
            thermal_or_hw: share(REASONS_THERMAL_OR_HW),
        })
    }

    /// The summary of the samples read inside any of `windows` (`[from, to]`, ends included);
    /// `None` where no sample landed in one.
    pub fn within(samples: &[ClockSample], windows: &[(Instant, Instant)]) -> Option<Self> {
        let inside: Vec<ClockSample> = samples
            .iter()
            .copied()
            .filter(|s| windows.iter().any(|&(from, to)| s.at >= from && s.at <= to))
            .collect();
        Self::of(&inside)
    }
}

impl std::fmt::Display for ClockStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SM {}/{}/{} MHz (min/median/max of {} samples), power up to {:.0} W, power-capped {:.0}% of the time",
            self.sm_mhz_min,
            self.sm_mhz_median,
            self.sm_mhz_max,
            self.samples,
            self.power_w_max,
            100.0 * self.power_capped
        )?;
        if self.thermal_or_hw > 0.0 {
            write!(f, ", thermal or HW slowdown {:.0}%", 100.0 * self.thermal_or_hw)?;
        }
        Ok(())
    }
}

/// NVML's device handle (`nvmlDevice_t`, an opaque pointer).
type NvmlDevice = *mut std::ffi::c_void;

/// The NVML entry points the sampler calls, loaded from `libnvidia-ml.so.1`.
struct Nvml {
    // The library stays loaded while the function pointers below are used.
    _lib: libloading::Library,
    shutdown: unsafe extern "C" fn() -> i32,
    clock: unsafe extern "C" fn(NvmlDevice, u32, *mut u32) -> i32,
    power: unsafe extern "C" fn(NvmlDevice, *mut u32) -> i32,
    reasons: Option<unsafe extern "C" fn(NvmlDevice, *mut u64) -> i32>,
}

/// `NVML_CLOCK_SM`.
const NVML_CLOCK_SM: u32 = 1;

impl Nvml {
    /// Loads NVML, initialises it and finds the device on `pci_bus_id` ("dddd:bb:dd.0").
    fn open(pci_bus_id: &str) -> Result<(Self, NvmlDevice), String> {
        // SAFETY: loading the driver's NVML runs its initialisers, which have no preconditions;
        // every symbol below is looked up with the C signature NVML's header gives it
        // (nvml.h: nvmlInit_v2, nvmlShutdown, nvmlDeviceGetHandleByPciBusId_v2,
        // nvmlDeviceGetClockInfo, nvmlDeviceGetPowerUsage, nvmlDeviceGetCurrentClocksEventReasons
        // or its older name ...ThrottleReasons), all returning nvmlReturn_t (an int).
        unsafe {
            let lib = libloading::Library::new("libnvidia-ml.so.1")
                .or_else(|_| libloading::Library::new("libnvidia-ml.so"))
                .map_err(|e| format!("no NVML ({e})"))?;
            let sym = |name: &[u8]| -> Result<*const (), String> {
                lib.get::<*const ()>(name)
                    .map(|s| *s)
                    .map_err(|e| format!("NVML lacks {}: {e}", String::from_utf8_lossy(name)))
            };
            let init: unsafe extern "C" fn() -> i32 = std::mem::transmute(sym(b"nvmlInit_v2\0")?);
            let shutdown: unsafe extern "C" fn() -> i32 = std::mem::transmute(sym(b"nvmlShutdown\0")?);
            let by_bus: unsafe extern "C" fn(*const std::ffi::c_char, *mut NvmlDevice) -> i32 =
                std::mem::transmute(sym(b"nvmlDeviceGetHandleByPciBusId_v2\0")?);
            let clock: unsafe extern "C" fn(NvmlDevice, u32, *mut u32) -> i32 =
                std::mem::transmute(sym(b"nvmlDeviceGetClockInfo\0")?);
            let power: unsafe extern "C" fn(NvmlDevice, *mut u32) -> i32 =
                std::mem::transmute(sym(b"nvmlDeviceGetPowerUsage\0")?);
            let reasons = sym(b"nvmlDeviceGetCurrentClocksEventReasons\0")
                .or_else(|_| sym(b"nvmlDeviceGetCurrentClocksThrottleReasons\0"))
                .ok()
                .map(|p| std::mem::transmute::<*const (), unsafe extern "C" fn(NvmlDevice, *mut u64) -> i32>(p));
            let rc = init();
            if rc != 0 {
                return Err(format!("nvmlInit_v2 returned {rc}"));
            }
            let bus = std::ffi::CString::new(pci_bus_id).map_err(|e| e.to_string())?;
            let mut device: NvmlDevice = std::ptr::null_mut();
            let rc = by_bus(bus.as_ptr(), &mut device);
            if rc != 0 {
                shutdown();
                return Err(format!("NVML has no device at PCI {pci_bus_id} (error {rc})"));
            }
            let nvml = Nvml {
                _lib: lib,
                shutdown,
                clock,
                power,
                reasons,
            };
            Ok((nvml, device))
        }
    }

    /// One sample of `device`; `None` where NVML refused the clock.
    fn sample(&self, device: NvmlDevice) -> Option<ClockSample> {
        let (mut mhz, mut mw, mut reasons) = (0u32, 0u32, 0u64);
        // SAFETY: `device` came from `Nvml::open` on this library, which stays initialised
        // until `Drop`; each call writes only through the pointer it is given.
        unsafe {
            if (self.clock)(device, NVML_CLOCK_SM, &mut mhz) != 0 {
                return None;
            }
            if (self.power)(device, &mut mw) != 0 {
                mw = 0;
            }
            if let Some(f) = self.reasons {
                if f(device, &mut reasons) != 0 {
                    reasons = 0;
                }
            }
        }
        Some(ClockSample {
            at: Instant::now(),
            sm_mhz: mhz,
            power_mw: mw,
            reasons,
        })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: balances the successful nvmlInit_v2 of `open`; nothing uses the handle after.
        unsafe {
            (self.shutdown)();
        }
    }
}

/// A thread that samples the device's clocks every `period` until stopped.
pub struct ClockSampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<ClockSample>>>,
    thread: Option<JoinHandle<()>>,
}

impl ClockSampler {
    /// Starts sampling `cx`'s device every `period` (found in NVML by its PCI bus id); an error
    /// saying why where NVML or the device is not there.
    pub fn start(cx: &Context, period: Duration) -> Result<Self, String> {
        use cudarc::driver::sys::CUdevice_attribute as Attr;
        let attr = |a| cx.cuda().attribute(a).map_err(|e| format!("reading the PCI id: {e}"));
        let bus_id = format!(
            "{:08X}:{:02X}:{:02X}.0",
            attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
        );
        let (nvml, device) = Nvml::open(&bus_id)?;
        nvml.sample(device)
            .ok_or_else(|| format!("NVML gave no SM clock for the device at PCI {bus_id}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop_t, samples_t) = (stop.clone(), samples.clone());
        // The handle is a plain pointer NVML allows from any thread; it moves with its library.
        let device = device as usize;
        let thread = std::thread::Builder::new()
            .name("cusync-clocks".into())
            .spawn(move || {
                let device = device as NvmlDevice;
                while !stop_t.load(Ordering::Relaxed) {
                    if let Some(s) = nvml.sample(device) {
                        samples_t.lock().expect("clock samples poisoned").push(s);
                    }
                    std::thread::sleep(period);
                }
            })
            .map_err(|e| format!("no sampling thread: {e}"))?;
        Ok(ClockSampler {
            stop,
            samples,
            thread: Some(thread),
        })
    }

    /// The samples so far.
    pub fn samples(&self) -> Vec<ClockSample> {
        self.samples.lock().expect("clock samples poisoned").clone()
    }

    /// Stops the thread and returns every sample.
    pub fn stop(mut self) -> Vec<ClockSample> {
        self.halt();
        self.samples()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ClockSampler {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: Instant, sm_mhz: u32, power_mw: u32, reasons: u64) -> ClockSample {
        ClockSample {
            at,
            sm_mhz,
            power_mw,
            reasons,
        }
    }

    #[test]
    fn stats_summarize_clocks_power_and_reasons() {
        let t = Instant::now();
        let s = [
            sample(t, 1980, 650_000, 0),
            sample(t + Duration::from_millis(2), 1395, 699_500, REASON_SW_POWER_CAP),
            sample(t + Duration::from_millis(4), 1455, 690_000, REASON_SW_POWER_CAP | 0x20),
            sample(t + Duration::from_millis(6), 1410, 120_000, 0),
        ];
        let st = ClockStats::of(&s).unwrap();
        assert_eq!(
            (st.samples, st.sm_mhz_min, st.sm_mhz_median, st.sm_mhz_max),
            (4, 1395, 1410, 1980)
        );
        assert!((st.sm_mhz_mean - 1560.0).abs() < 1e-9);
        assert!((st.power_w_max - 699.5).abs() < 1e-9);
        assert_eq!((st.power_capped, st.thermal_or_hw), (0.5, 0.25));
        let text = st.to_string();
        assert!(
            text.contains("SM 1395/1410/1980 MHz") && text.contains("power-capped 50%"),
            "{text}"
        );
        assert!(text.contains("thermal or HW slowdown 25%"), "{text}");
        // Windows keep the samples read inside them, ends included.
        let ms = |m| t + Duration::from_millis(m);
        let mid = ClockStats::within(&s, &[(ms(2), ms(4))]).unwrap();
        assert_eq!((mid.samples, mid.sm_mhz_min, mid.sm_mhz_max), (2, 1395, 1455));
        let ends = ClockStats::within(&s, &[(ms(0), ms(1)), (ms(5), ms(6))]).unwrap();
        assert_eq!((ends.samples, ends.sm_mhz_min, ends.sm_mhz_max), (2, 1410, 1980));
        assert_eq!(ends.power_capped, 0.0);
        assert!(!ends.to_string().contains("thermal"), "{ends}");
        assert!(ClockStats::within(&s, &[(ms(1000), ms(2000))]).is_none());
        assert!(ClockStats::within(&s, &[]).is_none());
        assert!(ClockStats::of(&[]).is_none());
    }
}
