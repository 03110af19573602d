//! The persistent model ([`super::persistent`]) and issue 5's stacks table
//! ([`super::stacks`]): hand-worked schedules, the bounds, and the refused options.

use super::persistent::{
    separate_kernels_time, simulate_persistent, waves_bound, PersistentSimError, PersistentSimOptions,
};
use super::stacks::{issue5_stacks, render_stacks, stack_plan, stack_rows, StackCase};
use crate::persistent::bench::StackPolicy;
use crate::persistent::SchedulePriority;

const UP: SchedulePriority = SchedulePriority::UpstreamFirst;
const DOWN: SchedulePriority = SchedulePriority::DownstreamFirst;

fn case(rows: u32, cols: u32, layers: u32) -> StackCase {
    StackCase {
        m: rows * 128,
        tile_m: 128,
        layers,
        rows,
        cols,
    }
}

#[test]
fn whole_waves_leave_nothing_to_win() {
    // 2 x 2 tiles a layer on 4 blocks: each layer is one wave, pipelined or not.
    let plan = stack_plan(case(2, 2, 2), StackPolicy::RowSync).unwrap();
    for priority in [UP, DOWN] {
        let opts = PersistentSimOptions::unit(4, 0.0, priority);
        let out = simulate_persistent(&plan, &opts).unwrap();
        assert_eq!(out.makespan, 2.0);
        assert_eq!(out.stages[1].first_start, 1.0);
        assert_eq!(out.utilization, 1.0);
        assert_eq!(separate_kernels_time(&plan, &opts), 2.0);
        assert_eq!(waves_bound(&plan, &opts), 2.0);
    }
}

#[test]
fn a_partial_wave_is_filled_with_the_next_layers_ready_rows() {
    // 3 x 2 tiles a layer on 4 blocks: separate kernels take 2 + 2 waves, all 12 tiles 3.
    // Layer 0's first wave (raster: column 0's rows, then (0, 1)) completes row 0, whose two
    // layer-1 tiles fill the second wave beside layer 0's last two tiles.
    let plan = stack_plan(case(3, 2, 2), StackPolicy::RowSync).unwrap();
    let opts = PersistentSimOptions::unit(4, 0.0, UP);
    let out = simulate_persistent(&plan, &opts).unwrap();
    assert_eq!(separate_kernels_time(&plan, &opts), 4.0);
    assert_eq!(waves_bound(&plan, &opts), 3.0);
    assert_eq!(out.makespan, 3.0);
    assert_eq!(out.stages[1].first_start, 1.0);
    assert_eq!(out.stages[0].last_end, 2.0);
    // With the whole layer as one band, layer 1 waits for all of layer 0: no gain.
    let band = stack_plan(case(3, 2, 2), StackPolicy::Band { rows: 3 }).unwrap();
    let out = simulate_persistent(&band, &opts).unwrap();
    assert_eq!(out.makespan, 4.0);
    assert_eq!(out.stages[1].first_start, 2.0);
}

#[test]
fn a_post_latency_delays_the_consumers_by_that_much() {
    let plan = stack_plan(case(2, 2, 2), StackPolicy::RowSync).unwrap();
    let opts = PersistentSimOptions::unit(4, 0.25, UP);
    let out = simulate_persistent(&plan, &opts).unwrap();
    assert_eq!(out.stages[1].first_start, 1.25);
    assert_eq!(out.makespan, 2.25);
    assert!(out.utilization < 1.0);
}

#[test]
fn per_stage_tile_times_scale_each_layer() {
    let plan = stack_plan(case(2, 2, 2), StackPolicy::RowSync).unwrap();
    let mut opts = PersistentSimOptions::unit(4, 0.0, DOWN);
    opts.tile_times = vec![1.0, 3.0];
    let out = simulate_persistent(&plan, &opts).unwrap();
    assert_eq!(out.makespan, 4.0);
    assert_eq!(separate_kernels_time(&plan, &opts), 4.0);
    assert_eq!(waves_bound(&plan, &opts), 4.0);
}

#[test]
fn bad_options_are_refused_before_the_model_runs() {
    let plan = stack_plan(case(2, 2, 3), StackPolicy::RowSync).unwrap();
    let zero = PersistentSimOptions::unit(0, 0.0, UP);
    assert!(matches!(
        simulate_persistent(&plan, &zero),
        Err(PersistentSimError::Options(_))
    ));
    let mut two = PersistentSimOptions::unit(4, 0.0, UP);
    two.tile_times = vec![1.0, 1.0];
    let err = simulate_persistent(&plan, &two).unwrap_err();
    assert!(err.to_string().contains("2 tile times for 3 stages"), "{err}");
    let mut negative = PersistentSimOptions::unit(4, -1.0, UP);
    assert!(simulate_persistent(&plan, &negative).is_err());
    negative.post_latency = f64::NAN;
    assert!(simulate_persistent(&plan, &negative).is_err());
    let mut zero_time = PersistentSimOptions::unit(4, 0.0, UP);
    zero_time.tile_times = vec![0.0];
    assert!(simulate_persistent(&plan, &zero_time).is_err());
}

#[test]
fn issue5_stacks_sit_between_their_bound_and_their_separate_kernels() {
    let policies = [StackPolicy::Band { rows: 8 }, StackPolicy::RowSync];
    for c in issue5_stacks().into_iter().filter(|c| c.m <= 4096) {
        for r in stack_rows(c, &policies, &[UP, DOWN], 132, 0.035).unwrap() {
            assert!(r.pipelined >= r.bound, "{r:?}");
            assert!(r.bound <= r.separate, "{r:?}");
        }
    }
    // M = 1024, 2 layers: 512 tiles are 4 waves either way (2 x 256 on 132 blocks).
    let rows = stack_rows(StackCase::new(1024, 8192, 2, 128, 256), &policies, &[UP], 132, 0.035).unwrap();
    assert!(rows.iter().all(|r| r.separate == 4.0 && r.bound == 4.0), "{rows:?}");
}

#[test]
fn the_stacks_table_has_a_row_per_stack_policy_and_priority() {
    let text = render_stacks();
    let rows = text
        .lines()
        .filter(|l| l.contains("RowBandSync8") || l.contains("RowSync"))
        .count();
    assert_eq!(rows, issue5_stacks().len() * 4, "{text}");
    assert!(!text.contains("failed"), "{text}");
}

mod microbatching {
    use super::super::microbatch::{best_microbatch, simulate_microbatch, MicrobatchCase};
    use super::super::stacks::stack_microbatch;
    use super::super::stacks::StackCase;

    fn mb(rows: u32, cols: u32, layers: u32, chunk_rows: u32, streams: u32, blocks: u32) -> MicrobatchCase {
        MicrobatchCase {
            rows,
            cols,
            layers,
            chunk_rows,
            streams,
            blocks,
        }
    }

    #[test]
    fn one_chunk_is_the_layers_one_after_another() {
        // 3 x 2 tiles a layer on 4 blocks: 2 + 2 waves, as separate kernels.
        assert_eq!(simulate_microbatch(&mb(3, 2, 2, 3, 4, 4)), Some(4.0));
    }

    #[test]
    fn chunks_on_streams_fill_each_others_partial_waves() {
        // One row a chunk (2 tiles a kernel), 3 chunks on 3 streams, 4 blocks: t = 0 chunk 0
        // and chunk 1's layer 0; t = 1 chunk 0's and chunk 1's layer 1 (launched earlier than
        // chunk 2's layer 0); t = 2 chunk 2's layer 0; t = 3 its layer 1.
        assert_eq!(simulate_microbatch(&mb(3, 2, 2, 1, 3, 4)), Some(4.0));
        // With 6 blocks everything of a layer fits: chunk 0's layer 1 waits only for its own
        // layer 0, so t = 1 runs every chunk's layer 1.
        assert_eq!(simulate_microbatch(&mb(3, 2, 2, 1, 3, 6)), Some(2.0));
        // One stream serializes the chunks: 3 chunks x 2 layers, one wave each.
        assert_eq!(simulate_microbatch(&mb(3, 2, 2, 1, 1, 6)), Some(6.0));
    }

    #[test]
    fn the_best_chunk_is_the_smallest_of_the_shortest() {
        let case = mb(3, 2, 2, 0, 3, 6);
        assert_eq!(best_microbatch(&case, &[3, 1]), Some((1, 2.0)));
        assert_eq!(simulate_microbatch(&mb(0, 2, 2, 1, 3, 6)), None);
        assert_eq!(best_microbatch(&case, &[0]), None);
    }

    #[test]
    fn issue5_micro_batching_reaches_the_wave_bound_of_the_2_layer_stack() {
        // M = 16384: 8192 tiles on 132 blocks, at best 63 waves; separate kernels take 64.
        let (rows, t) = stack_microbatch(StackCase::new(16384, 8192, 2, 128, 256), 132).unwrap();
        assert!((63.0..64.0).contains(&t), "{t} with {rows}-row chunks");
    }
}
