//! Thread, block, grid and SM identifiers (special registers).

macro_rules! special_u32 {
    ($(#[$doc:meta] $name:ident => $reg:literal;)*) => {$(
        #[$doc]
        #[inline(always)]
        pub fn $name() -> u32 {
            let v: u32;
            // SAFETY: reads a special register; no memory is touched.
            unsafe { core::arch::asm!(concat!("mov.u32 {}, ", $reg, ";"), out(reg32) v, options(pure, nomem, nostack)) };
            v
        }
    )*};
}

special_u32! {
    /// `%tid.x`: thread index in the block, x.
    tid_x => "%tid.x";
    /// `%tid.y`: thread index in the block, y.
    tid_y => "%tid.y";
    /// `%tid.z`: thread index in the block, z.
    tid_z => "%tid.z";
    /// `%ntid.x`: block size, x.
    ntid_x => "%ntid.x";
    /// `%ntid.y`: block size, y.
    ntid_y => "%ntid.y";
    /// `%ctaid.x`: block index, x.
    ctaid_x => "%ctaid.x";
    /// `%ctaid.y`: block index, y.
    ctaid_y => "%ctaid.y";
    /// `%ctaid.z`: block index, z.
    ctaid_z => "%ctaid.z";
    /// `%nctaid.x`: grid size in blocks, x.
    nctaid_x => "%nctaid.x";
    /// `%nctaid.y`: grid size in blocks, y.
    nctaid_y => "%nctaid.y";
    /// `%nctaid.z`: grid size in blocks, z.
    nctaid_z => "%nctaid.z";
    /// `%laneid`: lane within the warp (0..32).
    lane_id => "%laneid";
    /// `%warpid`: hardware warp slot (not stable over a warp's life; use tid/32 for roles).
    hw_warp_id => "%warpid";
    /// `%smid`: the SM this thread runs on (may change only across preemption).
    sm_id => "%smid";
    /// `%nsmid`: upper bound on `%smid` values (not necessarily the SM count).
    sm_id_bound => "%nsmid";
    /// `%cluster_ctarank` (sm_90): this block's rank in its cluster.
    cluster_ctarank => "%cluster_ctarank";
    /// `%clusterid.x` (sm_90): this block's cluster index in the grid, x.
    clusterid_x => "%clusterid.x";
    /// `%nclusterid.x` (sm_90): clusters in the grid, x.
    nclusterid_x => "%nclusterid.x";
}

/// Linear thread index within the block (x fastest).
#[inline(always)]
pub fn thread_linear() -> u32 {
    (tid_z() * ntid_y() + tid_y()) * ntid_x() + tid_x()
}

/// Linear block index within the grid (x fastest).
#[inline(always)]
pub fn block_linear() -> u32 {
    (ctaid_z() * nctaid_y() + ctaid_y()) * nctaid_x() + ctaid_x()
}
