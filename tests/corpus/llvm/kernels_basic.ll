; kernels_basic.ll -- taskcache LLVM IR corpus module (nvptx64, typed pointers, LLVM 14).
; Covers: several kernels marked via !nvvm.annotations; an internal
; (module-local) helper and an externally visible helper; addrspace(1)
; globals shared between kernels (a stage buffer written by one kernel and
; read by another, an atomic counter); a constant-address-space table
; (addrspace(4)); a global pointer initialised with the address of a table
; element; a table of function pointers and an indirect call through it;
; a kernel with no parameters.
; Build: llc -march=nvptx64 -mcpu=sm_80 -mattr=+ptx70 kernels_basic.ll -o kernels_basic.llc.ptx

target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@lb_stage = addrspace(1) global [256 x i32] zeroinitializer, align 4
@lb_counter = addrspace(1) global i32 0, align 4
@lb_weights = addrspace(4) constant [8 x i32] [i32 3, i32 -1, i32 4, i32 1, i32 -5, i32 9, i32 2, i32 -6], align 4
@lb_weight_mid = addrspace(1) global i32 addrspace(4)* getelementptr inbounds ([8 x i32], [8 x i32] addrspace(4)* @lb_weights, i64 0, i64 2), align 8
@lb_ops = addrspace(1) global [3 x i32 (i32)*] [i32 (i32)* @lb_op_inc, i32 (i32)* @lb_op_twice, i32 (i32)* @lb_helper_external], align 8

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define internal i32 @lb_global_index() noinline {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  ret i32 %i
}

; internal helper: weighted value using the constant table
define internal i32 @lb_helper_internal(i32 %x, i32 %i) noinline {
  %k = and i32 %i, 7
  %k64 = zext i32 %k to i64
  %wp = getelementptr inbounds [8 x i32], [8 x i32] addrspace(4)* @lb_weights, i64 0, i64 %k64
  %w = load i32, i32 addrspace(4)* %wp, align 4
  %m = mul i32 %x, %w
  ret i32 %m
}

; externally visible helper (.visible .func in PTX)
define i32 @lb_helper_external(i32 %x) noinline {
  %a = xor i32 %x, 1431655765
  %b = lshr i32 %a, 3
  %c = add i32 %a, %b
  ret i32 %c
}

define internal i32 @lb_op_inc(i32 %x) noinline {
  %r = add i32 %x, 1
  ret i32 %r
}

define internal i32 @lb_op_twice(i32 %x) noinline {
  %r = shl i32 %x, 1
  ret i32 %r
}

; stage[i] = helper_internal(in[i], i) + helper_external(in[i])
define void @lb_produce(i32 addrspace(1)* %in, i32 %n) {
entry:
  %i = call i32 @lb_global_index()
  %inb = icmp slt i32 %i, %n
  %small = icmp slt i32 %i, 256
  %ok = and i1 %inb, %small
  br i1 %ok, label %body, label %exit
body:
  %i64 = sext i32 %i to i64
  %p = getelementptr inbounds i32, i32 addrspace(1)* %in, i64 %i64
  %v = load i32, i32 addrspace(1)* %p, align 4
  %a = call i32 @lb_helper_internal(i32 %v, i32 %i)
  %b = call i32 @lb_helper_external(i32 %v)
  %s = add i32 %a, %b
  %q = getelementptr inbounds [256 x i32], [256 x i32] addrspace(1)* @lb_stage, i64 0, i64 %i64
  store i32 %s, i32 addrspace(1)* %q, align 4
  br label %exit
exit:
  ret void
}

; out[i] = stage[i] - *lb_weight_mid ; counts positive results atomically
define void @lb_consume(i32 addrspace(1)* %out, i32 %n) {
entry:
  %i = call i32 @lb_global_index()
  %inb = icmp slt i32 %i, %n
  %small = icmp slt i32 %i, 256
  %ok = and i1 %inb, %small
  br i1 %ok, label %body, label %exit
body:
  %i64 = sext i32 %i to i64
  %q = getelementptr inbounds [256 x i32], [256 x i32] addrspace(1)* @lb_stage, i64 0, i64 %i64
  %v = load i32, i32 addrspace(1)* %q, align 4
  %mp = load i32 addrspace(4)*, i32 addrspace(4)* addrspace(1)* @lb_weight_mid, align 8
  %m = load i32, i32 addrspace(4)* %mp, align 4
  %r = sub i32 %v, %m
  %p = getelementptr inbounds i32, i32 addrspace(1)* %out, i64 %i64
  store i32 %r, i32 addrspace(1)* %p, align 4
  %pos = icmp sgt i32 %r, 0
  br i1 %pos, label %count, label %exit
count:
  %old = atomicrmw add i32 addrspace(1)* @lb_counter, i32 1 monotonic
  br label %exit
exit:
  ret void
}

; data[i] = lb_ops[sel % 3](data[i])   (indirect call)
define void @lb_dispatch(i32 addrspace(1)* %data, i32 %n, i32 %sel) {
entry:
  %i = call i32 @lb_global_index()
  %ok = icmp slt i32 %i, %n
  br i1 %ok, label %body, label %exit
body:
  %s = urem i32 %sel, 3
  %s64 = zext i32 %s to i64
  %fpp = getelementptr inbounds [3 x i32 (i32)*], [3 x i32 (i32)*] addrspace(1)* @lb_ops, i64 0, i64 %s64
  %fp = load i32 (i32)*, i32 (i32)* addrspace(1)* %fpp, align 8
  %i64 = sext i32 %i to i64
  %p = getelementptr inbounds i32, i32 addrspace(1)* %data, i64 %i64
  %v = load i32, i32 addrspace(1)* %p, align 4
  %r = call i32 %fp(i32 %v)
  store i32 %r, i32 addrspace(1)* %p, align 4
  br label %exit
exit:
  ret void
}

; no parameters: resets the shared counter
define void @lb_reset() {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %z = icmp eq i32 %tid, 0
  br i1 %z, label %do, label %done
do:
  store i32 0, i32 addrspace(1)* @lb_counter, align 4
  br label %done
done:
  ret void
}

; out[0] = counter
define void @lb_report(i32 addrspace(1)* %out) {
  %c = load i32, i32 addrspace(1)* @lb_counter, align 4
  store i32 %c, i32 addrspace(1)* %out, align 4
  ret void
}

!nvvm.annotations = !{!0, !1, !2, !3, !4}
!0 = !{void (i32 addrspace(1)*, i32)* @lb_produce, !"kernel", i32 1}
!1 = !{void (i32 addrspace(1)*, i32)* @lb_consume, !"kernel", i32 1}
!2 = !{void (i32 addrspace(1)*, i32, i32)* @lb_dispatch, !"kernel", i32 1}
!3 = !{void ()* @lb_reset, !"kernel", i32 1}
!4 = !{void (i32 addrspace(1)*)* @lb_report, !"kernel", i32 1}
