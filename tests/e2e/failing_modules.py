"""PTX modules the in-process compiler fails on, written here (used by
tests/e2e/test_recover.py and tests/gpu/compiler_failures.py): a wgmma
whose matrix descriptors are the constant 0, which nvPTXCompiler 13.0
segfaults on and the ptxas program compiles; the same wgmma with
descriptors read from the parameter, which compiles with ptxas's numbered
advice; and mma.sync under `.maxnreg 16`, a compile that fails."""

WGMMA_HEAD = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 p)
{
	.reg .f32 %f<5>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [p];
"""
WGMMA_TAIL = """	mov.f32 %f1, 0f00000000;
	mov.f32 %f2, 0f00000000;
	mov.f32 %f3, 0f00000000;
	mov.f32 %f4, 0f00000000;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1,%f2,%f3,%f4}, %rd2, %rd3, 1, 1, 1, 0, 0;
	add.f32 %f1, %f1, %f2;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1,%f2,%f3,%f4}, %rd2, %rd3, 1, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	st.global.f32 [%rd1], %f1;
	ret;
}
"""
# the descriptors: constants (the in-process compiler segfaults), or read
# from the parameter (it compiles, and advises on the accumulator's use)
ZERO_DESCRIPTORS = WGMMA_HEAD + "\tmov.b64 %rd2, 0;\n\tmov.b64 %rd3, 0;\n" + WGMMA_TAIL
ADVISED = WGMMA_HEAD + "\tld.param.u64 %rd2, [p];\n\tld.param.u64 %rd3, [p];\n" + WGMMA_TAIL

TOO_FEW_REGISTERS = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 p)
.maxnreg 16
{
	.reg .b32 %r<7>;
	.reg .f32 %f<9>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [p];
	ld.global.v4.u32 {%r1,%r2,%r3,%r4}, [%rd1];
	ld.global.v2.u32 {%r5,%r6}, [%rd1+16];
	ld.global.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1+32];
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f5,%f6,%f7,%f8}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f1,%f2,%f3,%f4};
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f5,%f6,%f7,%f8};
	st.global.v4.f32 [%rd1], {%f1,%f2,%f3,%f4};
	st.global.v4.f32 [%rd1+16], {%f5,%f6,%f7,%f8};
	ret;
}
"""
