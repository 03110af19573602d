//! Chrome JSON and CSV: round trips, the layout Perfetto needs, and errors that say where.

use serde_json::Value;

use super::{events, hand_pipelined, Row};
use crate::trace::{ChromeLayout, SyntheticTwoStage, Trace, TraceMeta};
use crate::Error;

fn invalid(r: crate::Result<Trace>) -> String {
    match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn two_slot_trace() -> Trace {
    let rows: [Row; 3] = [
        (0, 0, 0, 0, [0, 0, 0, 10]),
        (0, 1, 0, 1, [0, 0, 1, 12]),
        (1, 0, 0, 2, [10, 11, 11, 20]),
    ];
    Trace::new(TraceMeta::default(), events(&rows)).unwrap()
}

#[test]
fn chrome_json_round_trips() {
    for trace in [
        hand_pipelined(),
        two_slot_trace(),
        Trace::synthetic_two_stage(&SyntheticTwoStage::default()),
    ] {
        for layout in [ChromeLayout::PerStage, ChromeLayout::PerGpu] {
            let text = trace.to_chrome_json(layout);
            let back = Trace::from_chrome_json(&text).unwrap();
            assert_eq!(back, trace, "{layout:?}");
        }
    }
}

#[test]
fn csv_round_trips() {
    for trace in [
        hand_pipelined(),
        two_slot_trace(),
        Trace::synthetic_two_stage(&SyntheticTwoStage::default()),
    ] {
        let text = trace.to_csv();
        assert!(text
            .lines()
            .any(|l| l == "stage,tile,sm,cta,t_dispatch,t_ready,t_start,t_end"));
        assert_eq!(Trace::from_csv(&text).unwrap(), trace);
    }
}

/// What Perfetto reads: `traceEvents` first, metadata events naming processes and SM rows,
/// one `tile` X event per tile and one `wait` X event per waiting tile, microseconds from 0.
#[test]
fn chrome_json_layout() {
    let trace = hand_pipelined();
    let text = trace.to_chrome_json(ChromeLayout::PerStage);
    assert!(text.starts_with("{\"traceEvents\": ["));
    assert!(!text.contains("displayTimeUnit"));
    let v: Value = serde_json::from_str(&text).unwrap();
    let evs = v["traceEvents"].as_array().unwrap();
    let of = |cat: &str| {
        evs.iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat)
            .collect::<Vec<_>>()
    };
    assert_eq!(of("tile").len(), 12);
    assert_eq!(of("wait").len(), 4);
    let min_ts = of("tile")
        .iter()
        .chain(&of("wait"))
        .map(|e| e["ts"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert_eq!(min_ts, 0.0);
    // c4 (consumer tile 4): main loop 22..31 us, wait 20..22 us.
    let c4 = of("tile")
        .into_iter()
        .find(|e| e["name"] == "consumer" && e["args"]["tile"] == 4)
        .unwrap();
    assert_eq!((c4["ts"].as_f64(), c4["dur"].as_f64()), (Some(22.0), Some(9.0)));
    let names: Vec<&str> = evs
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["stage 0: producer", "stage 1: consumer"]);
    assert!(evs
        .iter()
        .any(|e| e["name"] == "thread_name" && e["args"]["name"] == "SM 3"));
    assert_eq!(v["otherData"]["t0_ns"], super::BASE);

    // Two overlapping CTAs on one SM get two rows, named SM 0.0 and SM 0.1.
    let gpu = two_slot_trace().to_chrome_json(ChromeLayout::PerGpu);
    let v: Value = serde_json::from_str(&gpu).unwrap();
    let rows: Vec<&str> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(rows, vec!["SM 0.0", "SM 0.1"]);
}

#[test]
fn chrome_json_errors_name_the_place() {
    let m = invalid(Trace::from_chrome_json("{\"traceEvents\": [\n{\"ph\": }"));
    assert!(m.contains("malformed JSON") && m.contains("line 2"), "{m}");
    let m = invalid(Trace::from_chrome_json("[]"));
    assert!(m.starts_with("$:"), "{m}");
    let m = invalid(Trace::from_chrome_json("{}"));
    assert!(m.contains("$.traceEvents: missing"), "{m}");

    let text = hand_pipelined().to_chrome_json(ChromeLayout::PerStage);
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let k = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .position(|e| e["cat"] == "tile")
        .unwrap();
    v["traceEvents"][k]["args"]["t_end"] = Value::from("soon");
    let m = invalid(Trace::from_chrome_json(&v.to_string()));
    assert!(
        m.contains(&format!("$.traceEvents[{k}].args.t_end")) && m.contains("unsigned integer"),
        "{m}"
    );

    v["traceEvents"][k]["args"]["t_end"] = Value::from(1u64);
    let m = invalid(Trace::from_chrome_json(&v.to_string()));
    assert!(
        m.contains(&format!("$.traceEvents[{k}].args")) && m.contains("before"),
        "{m}"
    );

    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["otherData"]["cusync"]["sm_count"] = Value::from("many");
    let m = invalid(Trace::from_chrome_json(&v.to_string()));
    assert!(m.contains("$.otherData.cusync"), "{m}");
    v["otherData"]["cusync_trace_version"] = Value::from(7);
    let m = invalid(Trace::from_chrome_json(&v.to_string()));
    assert!(m.contains("cusync_trace_version"), "{m}");
}

#[test]
fn csv_reads_columns_by_name_and_ignores_extras() {
    let text = "# a comment\n\nt_end, t_start,t_ready,t_dispatch,cta,sm,tile,stage,note\n20,11,11,2,2,0,0,1,x\n";
    let t = Trace::from_csv(text).unwrap();
    assert_eq!(t.events.len(), 1);
    let e = t.events[0];
    assert_eq!((e.stage, e.tile, e.cta, e.t_dispatch, e.t_end), (1, 0, 2, 2, 20));
    assert_eq!(t.stage_name(1), "stage 1");
}

#[test]
fn csv_errors_name_the_line() {
    let head = "stage,tile,sm,cta,t_dispatch,t_ready,t_start,t_end\n";
    let m = invalid(Trace::from_csv(&format!(
        "# c\n{head}0,0,0,0,1,2,3,4\n0,1,0,0,1,2,x,4\n"
    )));
    assert!(m.starts_with("line 4: column t_start") && m.contains("\"x\""), "{m}");
    let m = invalid(Trace::from_csv(&format!("{head}0,0,0,0,1,2,3\n")));
    assert!(m.starts_with("line 2: expected 8 fields"), "{m}");
    let m = invalid(Trace::from_csv(&format!("{head}0,0,0,0,5,2,6,7\n")));
    assert!(
        m.starts_with("line 2:") && m.contains("t_ready (2) is before t_dispatch (5)"),
        "{m}"
    );
    let m = invalid(Trace::from_csv("stage,tile,sm,cta,t_dispatch,t_ready,t_start\n"));
    assert!(m.contains("line 1") && m.contains("lacks column t_end"), "{m}");
    let m = invalid(Trace::from_csv("# cusync-meta: {oops\n"));
    assert!(m.starts_with("line 1: metadata"), "{m}");
    let m = invalid(Trace::from_csv("# only comments\n"));
    assert!(m.contains("no header row"), "{m}");
    let m = invalid(Trace::from_csv(&format!(
        "# cusync-meta: {{\"sm_count\": 2}}\n{head}0,0,5,0,1,2,3,4\n"
    )));
    assert!(m.contains("sm 5 is not below"), "{m}");
}

#[test]
fn files_follow_the_extension() {
    let dir = std::env::temp_dir().join(format!("cusync-trace-test-{}", std::process::id()));
    let trace = hand_pipelined();
    let paths = trace.save_all(&dir, "hand").unwrap();
    assert_eq!(paths.len(), 3);
    assert_eq!(Trace::load(&dir.join("hand.json")).unwrap(), trace);
    assert_eq!(Trace::load(&dir.join("hand.csv")).unwrap(), trace);
    let m = invalid(Trace::load(&dir.join("hand.svg")));
    assert!(m.contains("cannot be read back"), "{m}");
    std::fs::write(dir.join("bad.csv"), "nonsense\n").unwrap();
    let m = invalid(Trace::load(&dir.join("bad.csv")));
    assert!(m.contains("bad.csv: line 1"), "{m}");
    let m = invalid(Trace::load(&dir.join("missing.json")));
    assert!(m.contains("cannot read trace"), "{m}");
    let out =
        crate::trace::cli::analyze_file(&dir.join("hand.csv"), &crate::trace::cli::SvgTarget::Beside, 10).unwrap();
    assert!(out.contains("wrote") && dir.join("hand.svg").exists(), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
