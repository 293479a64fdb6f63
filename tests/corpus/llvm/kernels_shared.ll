; kernels_shared.ll -- taskcache LLVM IR corpus module (nvptx64, typed pointers, LLVM 14).
; Covers: kernels marked via !nvvm.annotations, with "maxntidx" and
; "minctasm" annotations (-> .maxntid / .minnctapersm); a module-scope
; addrspace(3) shared array used by two kernels and by an internal helper
; they both call (with bar.sync); an addrspace(3) variable used by only one
; function, which llc demotes into that function's body (a function-scope
; .shared declaration inside a .func); an addrspace(4) float coefficient table
; read by two kernels; addrspace(1) globals shared between kernels (one
; writes a scale, another reads it); a generic pointer global initialised
; with an addrspacecast of another global (-> generic(sym) initializer);
; an internal recursive helper; an indirect call through a function
; pointer passed as a kernel argument; external and internal helpers.
; Build: llc -march=nvptx64 -mcpu=sm_80 -mattr=+ptx70 kernels_shared.ll -o kernels_shared.llc.ptx

target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@ls_tile = internal addrspace(3) global [128 x float] undef, align 4
@ls_calls = internal addrspace(3) global i32 undef, align 4
@ls_coeffs = addrspace(4) constant [4 x float] [float 5.000000e-01, float 2.500000e-01, float 1.250000e-01, float 6.250000e-02], align 4
@ls_scale = addrspace(1) global float 1.000000e+00, align 4
@ls_hist = addrspace(1) global [16 x i32] zeroinitializer, align 4
@ls_scale_generic = addrspace(1) global float* addrspacecast (float addrspace(1)* @ls_scale to float*), align 8

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier0()
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.sqrt.f32(float)
declare float @llvm.maxnum.f32(float, float)

; Stores v into ls_tile[tid], syncs, returns the tree-sum of the 128 entries.
define internal float @ls_block_sum(float %v) noinline {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %t64 = zext i32 %tid to i64
  %slot = getelementptr inbounds [128 x float], [128 x float] addrspace(3)* @ls_tile, i64 0, i64 %t64
  store float %v, float addrspace(3)* %slot, align 4
  call void @llvm.nvvm.barrier0()
  br label %loop
loop:
  %s = phi i32 [ 64, %entry ], [ %s.next, %latch ]
  %active = icmp ult i32 %tid, %s
  br i1 %active, label %add, label %latch
add:
  %o = add i32 %tid, %s
  %o64 = zext i32 %o to i64
  %other = getelementptr inbounds [128 x float], [128 x float] addrspace(3)* @ls_tile, i64 0, i64 %o64
  %a = load float, float addrspace(3)* %slot, align 4
  %b = load float, float addrspace(3)* %other, align 4
  %c = fadd float %a, %b
  store float %c, float addrspace(3)* %slot, align 4
  br label %latch
latch:
  call void @llvm.nvvm.barrier0()
  %s.next = lshr i32 %s, 1
  %more = icmp ne i32 %s.next, 0
  br i1 %more, label %loop, label %done
done:
  %r = load float, float addrspace(3)* getelementptr inbounds ([128 x float], [128 x float] addrspace(3)* @ls_tile, i64 0, i64 0), align 4
  %t0 = icmp eq i32 %tid, 0
  br i1 %t0, label %count, label %out
count:
  store i32 1, i32 addrspace(3)* @ls_calls, align 4
  br label %out
out:
  call void @llvm.nvvm.barrier0()
  ret float %r
}

; Horner evaluation with the constant coefficients.
define float @ls_poly(float %x) noinline {
  %c0p = getelementptr inbounds [4 x float], [4 x float] addrspace(4)* @ls_coeffs, i64 0, i64 0
  %c1p = getelementptr inbounds [4 x float], [4 x float] addrspace(4)* @ls_coeffs, i64 0, i64 1
  %c2p = getelementptr inbounds [4 x float], [4 x float] addrspace(4)* @ls_coeffs, i64 0, i64 2
  %c3p = getelementptr inbounds [4 x float], [4 x float] addrspace(4)* @ls_coeffs, i64 0, i64 3
  %c0 = load float, float addrspace(4)* %c0p, align 4
  %c1 = load float, float addrspace(4)* %c1p, align 4
  %c2 = load float, float addrspace(4)* %c2p, align 4
  %c3 = load float, float addrspace(4)* %c3p, align 4
  %h1 = call float @llvm.fma.f32(float %c3, float %x, float %c2)
  %h2 = call float @llvm.fma.f32(float %h1, float %x, float %c1)
  %h3 = call float @llvm.fma.f32(float %h2, float %x, float %c0)
  ret float %h3
}

; recursive: popcount-like digit sum in base 4 of (x & 0xffff)
define internal i32 @ls_digits4(i32 %x) noinline {
  %z = icmp eq i32 %x, 0
  br i1 %z, label %base, label %rec
base:
  ret i32 0
rec:
  %d = and i32 %x, 3
  %q = lshr i32 %x, 2
  %r = call i32 @ls_digits4(i32 %q)
  %s = add i32 %r, %d
  ret i32 %s
}

; out[block] = scale * sum(poly(in[i])) over the block (128 threads)
define void @ls_poly_sum(float addrspace(1)* %in, float addrspace(1)* %out, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = shl i32 %bid, 7
  %i = add i32 %base, %tid
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %load, label %join
load:
  %i64 = sext i32 %i to i64
  %p = getelementptr inbounds float, float addrspace(1)* %in, i64 %i64
  %x = load float, float addrspace(1)* %p, align 4
  %y = call float @ls_poly(float %x)
  br label %join
join:
  %v = phi float [ %y, %load ], [ 0.000000e+00, %entry ]
  %sum = call float @ls_block_sum(float %v)
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %store, label %exit
store:
  %sp = load float*, float* addrspace(1)* @ls_scale_generic, align 8
  %sc = load float, float* %sp, align 4
  %t = load float, float addrspace(3)* getelementptr inbounds ([128 x float], [128 x float] addrspace(3)* @ls_tile, i64 0, i64 0), align 4
  %tt = fadd float %sum, %t
  %avg = fmul float %tt, 5.000000e-01
  %r = fmul float %avg, %sc
  %b64 = zext i32 %bid to i64
  %q = getelementptr inbounds float, float addrspace(1)* %out, i64 %b64
  store float %r, float addrspace(1)* %q, align 4
  br label %exit
exit:
  ret void
}

; out[block] = sqrt(sum of squares) over the block; also histogram of digit sums
define void @ls_norm(float addrspace(1)* %in, float addrspace(1)* %out, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = shl i32 %bid, 7
  %i = add i32 %base, %tid
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %load, label %join
load:
  %i64 = sext i32 %i to i64
  %p = getelementptr inbounds float, float addrspace(1)* %in, i64 %i64
  %x = load float, float addrspace(1)* %p, align 4
  %sq = fmul float %x, %x
  %bits = bitcast float %x to i32
  %low = and i32 %bits, 65535
  %d = call i32 @ls_digits4(i32 %low)
  %bin = and i32 %d, 15
  %bin64 = zext i32 %bin to i64
  %hp = getelementptr inbounds [16 x i32], [16 x i32] addrspace(1)* @ls_hist, i64 0, i64 %bin64
  %old = atomicrmw add i32 addrspace(1)* %hp, i32 1 monotonic
  br label %join
join:
  %v = phi float [ %sq, %load ], [ 0.000000e+00, %entry ]
  %sum = call float @ls_block_sum(float %v)
  %first = icmp eq i32 %tid, 0
  br i1 %first, label %store, label %exit
store:
  %t = load float, float addrspace(3)* getelementptr inbounds ([128 x float], [128 x float] addrspace(3)* @ls_tile, i64 0, i64 0), align 4
  %mx = call float @llvm.maxnum.f32(float %sum, float %t)
  %r = call float @llvm.sqrt.f32(float %mx)
  %b64 = zext i32 %bid to i64
  %q = getelementptr inbounds float, float addrspace(1)* %out, i64 %b64
  store float %r, float addrspace(1)* %q, align 4
  br label %exit
exit:
  ret void
}

; sets ls_scale (read by ls_poly_sum through the generic pointer)
define void @ls_set_scale(float %s) {
  store float %s, float addrspace(1)* @ls_scale, align 4
  ret void
}

; data[i] = f(data[i]) where f is a device function pointer argument
define void @ls_apply(float (float)* %f, float addrspace(1)* %data, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = shl i32 %bid, 7
  %i = add i32 %base, %tid
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %exit
body:
  %i64 = sext i32 %i to i64
  %p = getelementptr inbounds float, float addrspace(1)* %data, i64 %i64
  %x = load float, float addrspace(1)* %p, align 4
  %y = call float %f(float %x)
  %c0p = getelementptr inbounds [4 x float], [4 x float] addrspace(4)* @ls_coeffs, i64 0, i64 0
  %c0 = load float, float addrspace(4)* %c0p, align 4
  %z = fmul float %y, %c0
  store float %z, float addrspace(1)* %p, align 4
  br label %exit
exit:
  ret void
}

; the host passes this address (e.g. read back from ls_poly_ptr) to ls_apply
@ls_poly_ptr = addrspace(1) global float (float)* @ls_poly, align 8

!nvvm.annotations = !{!0, !1, !2, !3, !4, !5, !6, !7}
!0 = !{void (float addrspace(1)*, float addrspace(1)*, i32)* @ls_poly_sum, !"kernel", i32 1}
!1 = !{void (float addrspace(1)*, float addrspace(1)*, i32)* @ls_poly_sum, !"maxntidx", i32 128}
!2 = !{void (float addrspace(1)*, float addrspace(1)*, i32)* @ls_poly_sum, !"minctasm", i32 2}
!3 = !{void (float addrspace(1)*, float addrspace(1)*, i32)* @ls_norm, !"kernel", i32 1}
!4 = !{void (float addrspace(1)*, float addrspace(1)*, i32)* @ls_norm, !"reqntidx", i32 128}
!5 = !{void (float)* @ls_set_scale, !"kernel", i32 1}
!6 = !{void (float (float)*, float addrspace(1)*, i32)* @ls_apply, !"kernel", i32 1}
!7 = !{void (float (float)*, float addrspace(1)*, i32)* @ls_apply, !"maxntidx", i32 256}
