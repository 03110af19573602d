#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch))]

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    unsafe { core::arch::asm!("trap;", options(noreturn)) }
}

#[cfg(target_arch = "nvptx64")]
#[no_mangle]
pub unsafe extern "ptx-kernel" fn probe(out: *mut u32) {
    let t: u32;
    core::arch::asm!("mov.u32 {}, %tid.x;", out(reg32) t);
    *out.add(t as usize) = t + 1;
}
