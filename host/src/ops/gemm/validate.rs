//! Each launch's buffers checked against the problem (dtype, length, device, alignment), and
//! the trace events of a plain launch read back, checked.

use super::{GemmConfig, Layout};
use crate::runtime::Element;
use crate::{DeviceBuffer, Error, Result};
use cusync_shared::layout::TraceEvent;

/// Checks a launch's buffers against `cfg` on device `ordinal`: element types (A and B of
/// the input type, C of the output type), lengths (at least the dense storage of each
/// operand), devices, element alignment, and a bias exactly when the epilogue reads one.
/// Returns the bias address (0 without one).
pub fn validate_buffers<I: Element, O: Element>(
    cfg: &GemmConfig,
    ordinal: usize,
    a: &DeviceBuffer<I>,
    b: &DeviceBuffer<I>,
    c: &DeviceBuffer<O>,
    bias: Option<&DeviceBuffer<f32>>,
) -> Result<u64> {
    if I::NAME != cfg.input.name() {
        return Err(Error::InvalidArgument(format!(
            "GeMM dtype mismatch: configured for {} inputs, but A and B are {} buffers",
            cfg.input.name(),
            I::NAME
        )));
    }
    if O::NAME != cfg.output.name() {
        return Err(Error::InvalidArgument(format!(
            "GeMM dtype mismatch: configured for {} output, but C is a {} buffer",
            cfg.output.name(),
            O::NAME
        )));
    }
    let (a_shape, b_shape) = storage_shapes(cfg);
    check_buffer(
        "A",
        a_shape,
        a.len(),
        cfg.a_len(),
        a.device(),
        a.addr(),
        I::NAME,
        ordinal,
    )?;
    check_buffer(
        "B",
        b_shape,
        b.len(),
        cfg.b_len(),
        b.device(),
        b.addr(),
        I::NAME,
        ordinal,
    )?;
    let c_shape = format!("[M, N] = [{}, {}]", cfg.m, cfg.n);
    check_buffer(
        "C",
        c_shape,
        c.len(),
        cfg.c_len(),
        c.device(),
        c.addr(),
        O::NAME,
        ordinal,
    )?;
    match (cfg.epilogue.has_bias(), bias) {
        (true, Some(v)) => {
            let shape = format!("[N] = [{}]", cfg.n);
            check_buffer("bias", shape, v.len(), cfg.n, v.device(), v.addr(), "f32", ordinal)?;
            Ok(v.addr())
        }
        (true, None) => Err(Error::InvalidArgument(format!(
            "GeMM epilogue {:?} reads a bias vector of N = {} f32, but none was given",
            cfg.epilogue, cfg.n
        ))),
        (false, Some(_)) => Err(Error::InvalidArgument(format!(
            "a bias vector was given, but the GeMM epilogue {:?} does not read one (use Bias or BiasGelu)",
            cfg.epilogue
        ))),
        (false, None) => Ok(0),
    }
}

fn storage_shapes(c: &GemmConfig) -> (String, String) {
    let a = match c.a_layout {
        Layout::RowMajor => format!("[M, K] = [{}, {}]", c.m, c.k),
        Layout::Transposed => format!("[K, M] = [{}, {}] (transposed)", c.k, c.m),
    };
    let b = match c.b_layout {
        Layout::RowMajor => format!("[K, N] = [{}, {}]", c.k, c.n),
        Layout::Transposed => format!("[N, K] = [{}, {}] (transposed)", c.n, c.k),
    };
    (a, b)
}

#[allow(clippy::too_many_arguments)]
fn check_buffer(
    what: &str,
    shape: String,
    len: usize,
    need: usize,
    device: usize,
    addr: u64,
    elem: &str,
    ordinal: usize,
) -> Result<()> {
    if len < need {
        return Err(Error::InvalidArgument(format!(
            "GeMM {what} buffer too small: {what} {shape} needs {need} {elem} elements, the buffer holds {len}"
        )));
    }
    if device != ordinal {
        return Err(Error::InvalidArgument(format!(
            "GeMM {what} buffer is on device {device}, but the GeMM runs on device {ordinal}"
        )));
    }
    let size = if elem == "f32" { 4 } else { 2 };
    if !addr.is_multiple_of(size) {
        return Err(Error::InvalidArgument(format!(
            "GeMM {what} buffer address {addr:#x} is not aligned to its {elem} element size ({size} bytes)"
        )));
    }
    Ok(())
}

/// Checks the trace buffer of a traced launch of `kernel` running `tiles` output tiles on
/// device `ordinal`: `len` bytes, at least one [`TraceEvent`] per tile, on that device,
/// aligned for the events' 8-byte fields.
pub(super) fn check_trace_buffer(
    tiles: usize,
    len: usize,
    device: usize,
    addr: u64,
    ordinal: usize,
    kernel: &str,
) -> Result<()> {
    let event = std::mem::size_of::<TraceEvent>();
    let need = tiles * event;
    if len < need {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace buffer too small: `{kernel}` runs {tiles} output tiles, one {event}-byte TraceEvent each \
             = {need} bytes, but the buffer holds {len} (allocate it with cusync::stream::trace_buffer(cx, \
             gemm.trace_tiles(&p)))"
        )));
    }
    if device != ordinal {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace buffer is on device {device}, but the GeMM runs on device {ordinal}"
        )));
    }
    if !addr.is_multiple_of(8) {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace buffer address {addr:#x} is not aligned to 8 bytes (TraceEvent's u64 times)"
        )));
    }
    Ok(())
}

/// The events of a traced plain launch of `kernel` over `tiles` output tiles (the buffer's
/// first `tiles` events; see [`super::Gemm::launch_traced`]), relabelled as stage `stage`. Event `i`
/// must be tile `i`'s as the kernel writes it (`tile == i`, stage 0, a timestamp), so a tile
/// the kernel did not trace (a zeroed or poisoned slot) is an error that says how many are
/// missing, never a stray event.
pub fn plain_trace_events(
    mut events: Vec<TraceEvent>,
    tiles: usize,
    stage: u32,
    kernel: &str,
) -> Result<Vec<TraceEvent>> {
    if events.len() < tiles {
        return Err(Error::InvalidArgument(format!(
            "GeMM trace of `{kernel}`: {} events read back for {tiles} tiles",
            events.len()
        )));
    }
    events.truncate(tiles);
    let written = |i: usize, e: &TraceEvent| e.tile as usize == i && e.stage == 0 && e.t_dispatch != 0;
    let missing = events.iter().enumerate().filter(|(i, e)| !written(*i, e)).count();
    if let Some((i, e)) = events.iter().enumerate().find(|(i, e)| !written(*i, e)) {
        return Err(Error::Verification(format!(
            "GeMM trace of `{kernel}`: {missing} of {tiles} tiles have no event (first: slot {i} holds \
             stage {} tile {} t_dispatch {}); does this kernel write traces?",
            e.stage, e.tile, e.t_dispatch
        )));
    }
    for e in &mut events {
        e.stage = stage;
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_checks_name_the_problem() {
        let e = check_buffer("A", "[M, K] = [4, 8]".into(), 31, 32, 0, 0x1000, "bf16", 0).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("A buffer too small") && msg.contains("needs 32 bf16") && msg.contains("holds 31"),
            "{msg}"
        );
        let msg = check_buffer("B", "[K, N]".into(), 64, 32, 1, 0x1000, "bf16", 0)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("B buffer is on device 1") && msg.contains("device 0"),
            "{msg}"
        );
        let msg = check_buffer("C", "[M, N]".into(), 64, 32, 0, 0x1002, "f32", 0)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("not aligned") && msg.contains("4 bytes"), "{msg}");
        assert!(check_buffer("C", "[M, N]".into(), 32, 32, 0, 0x1000, "f32", 0).is_ok());
    }

    #[test]
    fn trace_buffer_checks_name_the_problem() {
        let k = "gemm_bf16_128x128";
        let msg = check_trace_buffer(10, 479, 0, 0x1000, 0, k).unwrap_err().to_string();
        assert!(
            msg.contains("trace buffer too small")
                && msg.contains("10 output tiles")
                && msg.contains("480 bytes")
                && msg.contains("holds 479")
                && msg.contains(k),
            "{msg}"
        );
        let msg = check_trace_buffer(10, 480, 1, 0x1000, 0, k).unwrap_err().to_string();
        assert!(msg.contains("on device 1") && msg.contains("device 0"), "{msg}");
        let msg = check_trace_buffer(10, 480, 0, 0x1004, 0, k).unwrap_err().to_string();
        assert!(msg.contains("0x1004") && msg.contains("8 bytes"), "{msg}");
        assert!(check_trace_buffer(10, 480, 0, 0x1000, 0, k).is_ok());
        assert!(check_trace_buffer(10, 4800, 0, 0x1000, 0, k).is_ok());
    }

    #[test]
    fn plain_trace_events_are_checked_and_relabelled() {
        let event = |tile: u32| TraceEvent {
            tile,
            sm: 3,
            cta: tile,
            t_dispatch: 100 + u64::from(tile),
            t_ready: 100 + u64::from(tile),
            t_start: 100 + u64::from(tile),
            t_end: 200 + u64::from(tile),
            ..TraceEvent::default()
        };
        let poison: TraceEvent = bytemuck::cast([0xFFu8; 48]);
        let mut all: Vec<TraceEvent> = (0..4).map(event).collect();
        all.push(poison); // past the tiles: ignored
        let got = plain_trace_events(all.clone(), 4, 1, "k").unwrap();
        assert_eq!(got.len(), 4);
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, e)| e.stage == 1 && e.tile as usize == i));
        assert_eq!(got[2].t_end, 202);
        // A poisoned slot, a zeroed one (tile 0 included), a misplaced one.
        let mut holes = all.clone();
        holes[1] = poison;
        holes[3] = TraceEvent::default();
        let msg = plain_trace_events(holes, 4, 0, "k").unwrap_err().to_string();
        assert!(
            msg.contains("2 of 4 tiles have no event") && msg.contains("slot 1"),
            "{msg}"
        );
        let mut zero = all.clone();
        zero[0] = TraceEvent::default();
        let msg = plain_trace_events(zero, 4, 0, "k").unwrap_err().to_string();
        assert!(msg.contains("1 of 4") && msg.contains("slot 0"), "{msg}");
        let mut swapped = all.clone();
        swapped.swap(0, 2);
        assert!(plain_trace_events(swapped, 4, 0, "k").is_err());
        let msg = plain_trace_events(all, 6, 0, "k").unwrap_err().to_string();
        assert!(msg.contains("5 events read back for 6 tiles"), "{msg}");
    }
}
