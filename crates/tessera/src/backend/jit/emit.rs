//! Loop IR → Cranelift IR.
//!
//! Each IR variable is a Cranelift `Variable` (the frontend builds SSA form). Each buffer's
//! data pointer and length live in variables too, loaded from the view table at entry and
//! reloaded only after a `Grow` of that buffer, so loops index straight off registers. Every
//! load and store is checked against the length; a failed check leaves through a per-buffer
//! exit block that records the index and returns the fault code. An innermost counted loop
//! whose accesses allow it is versioned (`backend::versioning`): one range test before the
//! loop picks a copy without those checks.
//!
//! A `Limit` point is an `i128` holding its order key (`backend::limit_code`), so comparing
//! points is one integer compare and `min`/`max` a compare and a select.

use crate::backend::GROW_BASE;
use crate::backend::limit_code;
use crate::backend::versioning::{self, Access, At, Gathers};
use crate::backend::walked;
use crate::ir::{BinOp, BufId, Expr, Kernel, Stmt, UnOp, vector};
use crate::limit::Limit;
use crate::runtime::abi::{self, VIEW_LEN, VIEW_PTR, VIEW_SIZE};
use crate::types::{CANONICAL_NAN, ElemType, Scalar};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    AbiParam, AtomicRmwOp, Block, BlockArg, Function, InstBuilder, MemFlagsData, SigRef, Signature,
    StackSlot, StackSlotData, StackSlotKind, Type, Value, types,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use std::collections::HashMap;

pub fn emit(
    k: &Kernel,
    func: &mut Function,
    fctx: &mut FunctionBuilderContext,
    cfg: TargetFrontendConfig,
    cc: CallConv,
) {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let sig = |b: &mut FunctionBuilder, params: &[Type], ret: Type| {
        let mut s = Signature::new(cc);
        s.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        s.returns.push(AbiParam::new(ret));
        b.import_signature(s)
    };
    let sig_f1 = sig(&mut b, &[types::F64], types::F64);
    let sig_f2 = sig(&mut b, &[types::F64, types::F64], types::F64);
    let sig_grow = sig(&mut b, &[types::I64, types::I64, types::I64], types::I64);
    let sig_i4 = sig(&mut b, &[types::I64; 4], types::I64);
    let sig_i6 = sig(&mut b, &[types::I64; 6], types::I64);
    let mut e = Emitter {
        k,
        b,
        vars: vec![],
        slots: vec![],
        bptr: vec![],
        blen: vec![],
        views: params[0],
        state: params[1],
        fault: params[2],
        exits: vec![],
        oob: HashMap::new(),
        unchecked: vec![],
        pretested: vec![],
        in_outer: false,
        failed: vec![],
        gathers: Gathers::of(k),
        belows: vec![],
        sig_f1,
        sig_f2,
        sig_grow,
        sig_i4,
        sig_i6,
    };
    for v in &k.vars {
        let ty = clif(v.ty);
        let var = e.b.declare_var(ty);
        let zero = e.zero(ty);
        e.b.def_var(var, zero);
        e.vars.push(var);
        // A cold variable lives in a stack slot: in a register it would be live across the
        // hot loop between its save and its restore, and Cranelift's allocator then spills
        // values the loop does use (in SpMV, a length reloaded and stored every entry).
        let slot = v.cold.then(|| {
            let size = ty.bytes();
            let s = StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                size,
                size.trailing_zeros() as u8,
            );
            let s = e.b.create_sized_stack_slot(s);
            e.b.ins().stack_store(types::I64, zero, s, 0);
            s
        });
        e.slots.push(slot);
    }
    for _ in &k.bufs {
        let p = e.b.declare_var(types::I64);
        let l = e.b.declare_var(types::I64);
        e.bptr.push(p);
        e.blen.push(l);
    }
    for k in 0..k.bufs.len() {
        e.reload(BufId(k as u32));
    }
    // The checked bounds, read once: they keep their values through the run (see the C
    // backend).
    for g in 0..e.gathers.belows.len() {
        let below = e.gathers.belows[g].clone();
        let x = e.expr(&below);
        let var = e.b.declare_var(types::I64);
        e.b.def_var(var, x);
        e.belows.push(var);
    }
    e.stmts(&k.body);
    let ok = e.b.ins().iconst(types::I64, 0);
    e.b.ins().return_(&[ok]);
    e.finish_fault_blocks();
    e.b.seal_all_blocks();
    e.b.finalize(cfg);
}

/// The Cranelift type of a compute type (`Bool` is a byte holding 0 or 1, `Limit` the
/// point's 128-bit key).
fn clif(t: ElemType) -> Type {
    match t.compute() {
        ElemType::Bool => types::I8,
        ElemType::F64 => types::F64,
        ElemType::Limit => types::I128,
        _ => types::I64,
    }
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Lanes' loads and stores: in bounds (tested before the loop) but not `aligned`, which a
/// Vec's elements are only to their own size.
fn lane_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// The 128-bit vector type of a compute type's lanes (`ir::vector`: F64 or I64).
fn lanes_of(t: ElemType) -> Type {
    match t {
        ElemType::F64 => types::F64X2,
        _ => types::I64X2,
    }
}

struct Emitter<'a, 'f> {
    k: &'a Kernel,
    b: FunctionBuilder<'f>,
    vars: Vec<Variable>,
    /// The stack slots of cold variables (`ir::VarDecl::cold`), which bypass `vars`.
    slots: Vec<Option<StackSlot>>,
    bptr: Vec<Variable>,
    blen: Vec<Variable>,
    views: Value,
    state: Value,
    fault: Value,
    /// Exit blocks of the enclosing loops (innermost last), the targets of `break`.
    exits: Vec<Block>,
    /// Per-buffer out-of-bounds exits, created on first use; each takes the bad index.
    oob: HashMap<u32, Block>,
    /// Accesses whose range the enclosing versioned loop tested before entering.
    unchecked: Vec<Access>,
    /// Accesses of inner loops that an enclosing loop's test covers: unchecked inside a loop
    /// over their variable, with no test of its own (`versioning::At::Between`).
    pretested: Vec<Access>,
    /// Inside either copy of a versioned loop with loops inside
    /// (`versioning::outer_versionable`), where no other such loop is versioned.
    in_outer: bool,
    /// Gathers whose test an enclosing versioned loop found false (its bound is 0: the
    /// coordinates are not vouched for, `At::Gathered`): inner loops keep their checks without
    /// testing again.
    failed: Vec<Access>,
    /// The variables holding only checked coordinates, for versioning gathers.
    gathers: Gathers,
    /// The values of `gathers.belows`, read at entry.
    belows: Vec<Variable>,
    sig_f1: SigRef,
    sig_f2: SigRef,
    sig_grow: SigRef,
    /// Helpers of four and six i64 arguments returning i64 (sorting).
    sig_i4: SigRef,
    sig_i6: SigRef,
}

impl Emitter<'_, '_> {
    /// The zero of a compute type: for a point, `0+0` (whose key is not 0).
    fn zero(&mut self, ty: Type) -> Value {
        if ty == types::F64 {
            self.b.ins().f64const(0.0)
        } else if ty == types::I128 {
            self.limit_const(Limit::exact(0.0))
        } else {
            self.b.ins().iconst(ty, 0)
        }
    }

    /// A constant point (canonicalised, like every point a kernel makes).
    fn limit_const(&mut self, p: Limit<f64>) -> Value {
        let key = limit_code::encode(p);
        let lo = self.int(key as i64);
        let hi = self.int((key >> 64) as i64);
        self.b.ins().iconcat(lo, hi)
    }

    /// `Expr::MakeLimit`: the key of the canonical point `v + sign(e)·ε`.
    fn make_limit(&mut self, v: Value, e: Value) -> Value {
        let bits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), v);
        // -0.0 → +0.0, any NaN → the canonical one (integer selects: nothing to fold).
        let neg_zero = self.b.ins().icmp_imm_s(IntCC::Equal, bits, i64::MIN);
        let zero = self.int(0);
        let bits = self.b.ins().select(neg_zero, zero, bits);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, v, v);
        let canon = self.int(CANONICAL_NAN as i64);
        let bits = self.b.ins().select(nan, canon, bits);
        let k = self.ordkey(bits);
        let (m1, p1) = (self.int(-1), self.int(1));
        let e = self.b.ins().smax(e, m1);
        let e = self.b.ins().smin(e, p1);
        let low = self.b.ins().iadd_imm_s(e, 1);
        // key = k * 4 + (eps + 1): the low word is `k << 2 | low`, the high word k's sign
        // extension of its top two bits.
        let shifted = self.b.ins().ishl_imm_s(k, 2);
        let lo = self.b.ins().bor(shifted, low);
        let hi = self.b.ins().sshr_imm_s(k, 62);
        self.b.ins().iconcat(lo, hi)
    }

    /// `c ? x : y` on points, one 64-bit half at a time. An `i128` select of the operands of
    /// its own compare (`select(y < x, y, x)`) is what Cranelift's optimiser rewrites into
    /// `smin.i128`/`smax.i128`, which the x64 backend cannot compile.
    fn select_limit(&mut self, c: Value, x: Value, y: Value) -> Value {
        let (xl, xh) = self.b.ins().isplit(x);
        let (yl, yh) = self.b.ins().isplit(y);
        let lo = self.b.ins().select(c, xl, yl);
        let hi = self.b.ins().select(c, xh, yh);
        self.b.ins().iconcat(lo, hi)
    }

    /// `limit_code::ordkey` on an i64 of float bits (its own inverse).
    fn ordkey(&mut self, bits: Value) -> Value {
        let sign = self.b.ins().sshr_imm_s(bits, 63);
        let mask = self.b.ins().ushr_imm_s(sign, 1);
        self.b.ins().bxor(bits, mask)
    }

    /// The operations on a point's key (`UnOp::LimitVal`, `LimitEps`, `After`, `Before`).
    fn limit_unary(&mut self, op: UnOp, key: Value) -> Value {
        let (lo, hi) = self.b.ins().isplit(key);
        let low = self.b.ins().band_imm_s(lo, 3);
        match op {
            UnOp::LimitVal => {
                // The key shifted right by two, in one word.
                let a = self.b.ins().ushr_imm_s(lo, 2);
                let b = self.b.ins().ishl_imm_s(hi, 62);
                let k = self.b.ins().bor(a, b);
                let bits = self.ordkey(k);
                self.b.ins().bitcast(types::F64, MemFlagsData::new(), bits)
            }
            UnOp::LimitEps => self.b.ins().iadd_imm_s(low, -1),
            // The low two bits are eps + 1 in {0, 1, 2}; stepping them never carries.
            UnOp::After => {
                // +1 unless already +ε: (3 - low) >> 1.
                let three = self.int(3);
                let room = self.b.ins().isub(three, low);
                let inc = self.b.ins().ushr_imm_s(room, 1);
                let lo = self.b.ins().iadd(lo, inc);
                self.b.ins().iconcat(lo, hi)
            }
            UnOp::Before => {
                // -1 unless already -ε: (low + 1) >> 1.
                let up = self.b.ins().iadd_imm_s(low, 1);
                let dec = self.b.ins().ushr_imm_s(up, 1);
                let lo = self.b.ins().isub(lo, dec);
                self.b.ins().iconcat(lo, hi)
            }
            op => unreachable!("{op:?} is not an operation on points"),
        }
    }

    fn int(&mut self, v: i64) -> Value {
        self.b.ins().iconst(types::I64, v)
    }

    /// Load a buffer's pointer and length from the view table.
    fn reload(&mut self, buf: BufId) {
        let base = buf.0 as i32 * VIEW_SIZE;
        let p = self
            .b
            .ins()
            .load(types::I64, flags(), self.views, base + VIEW_PTR);
        let l = self
            .b
            .ins()
            .load(types::I64, flags(), self.views, base + VIEW_LEN);
        self.b.def_var(self.bptr[buf.0 as usize], p);
        self.b.def_var(self.blen[buf.0 as usize], l);
    }

    /// After a terminator, later statements of the same list are unreachable; they still need
    /// a block to be emitted into.
    fn fresh_block(&mut self) {
        let blk = self.b.create_block();
        self.b.switch_to_block(blk);
    }

    fn oob_block(&mut self, buf: BufId) -> Block {
        if let Some(&blk) = self.oob.get(&buf.0) {
            return blk;
        }
        let blk = self.b.create_block();
        self.b.append_block_param(blk, types::I64);
        self.oob.insert(buf.0, blk);
        blk
    }

    fn finish_fault_blocks(&mut self) {
        let mut blocks: Vec<(u32, Block)> = self.oob.iter().map(|(&b, &blk)| (b, blk)).collect();
        blocks.sort();
        for (buf, blk) in blocks {
            self.b.switch_to_block(blk);
            let index = self.b.block_params(blk)[0];
            self.b.ins().store(flags(), index, self.fault, 0);
            let code = self.int(-(buf as i64) - 1);
            self.b.ins().return_(&[code]);
        }
    }

    /// Branch to the buffer's fault exit with `report` unless `ok` holds.
    fn guard(&mut self, ok: Value, buf: BufId, report: Value) {
        let cont = self.b.create_block();
        let fail = self.oob_block(buf);
        self.b
            .ins()
            .brif(ok, cont, &[], fail, &[BlockArg::Value(report)]);
        self.b.switch_to_block(cont);
    }

    /// The address of `buf[index]`, after checking `0 <= index < len`.
    fn element(&mut self, buf: BufId, index: Value) -> Value {
        let len = self.b.use_var(self.blen[buf.0 as usize]);
        let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, index, len);
        self.guard(ok, buf, index);
        self.address(buf, index)
    }

    /// The address of `buf[index]` (`i` its value): checked unless the enclosing versioned
    /// loop tested the access's range.
    fn checked_element(&mut self, buf: BufId, index: &Expr, i: Value) -> Value {
        if self.unchecked.iter().any(|a| a.is(buf, index)) {
            self.address(buf, i)
        } else {
            self.element(buf, i)
        }
    }

    /// The copy of a versioned loop whose range tests passed: `accesses` unchecked (those of
    /// inner loops inside their own loop), `pretested` too.
    fn unchecked_copy(
        &mut self,
        var: crate::ir::VarId,
        (start, stop): (Value, Value),
        body: &[Stmt],
        accesses: &[Access],
        pretested: &[Access],
    ) {
        let (inner, own): (Vec<Access>, Vec<Access>) = accesses
            .iter()
            .partition(|a| matches!(a.at, At::Between { var: w, .. } if w != var));
        let saved = (self.unchecked.len(), self.pretested.len());
        self.unchecked.extend(own);
        self.unchecked.extend(pretested.iter().copied());
        self.pretested.extend(inner);
        let v = self.vars[var.0 as usize];
        // A vectorised loop of the lanes' class runs its iterations two at a time, then the
        // rest (at most one) as the scalar loop from where the lanes stopped.
        let start = match self.lane_plan(var, body) {
            Some(plan) => self.vector_loop(var, start, stop, body, &plan),
            None => start,
        };
        self.counted_loop(v, start, stop, |e, _| e.stmts(body));
        self.unchecked.truncate(saved.0);
        self.pretested.truncate(saved.1);
    }

    /// The lanes' plan of loop `var` (`ir::vector`) when it is vectorised, in the class, and
    /// every access of its body was tested before it (this copy of a versioned loop), so
    /// that lanes need no bounds checks; `None` runs it scalar.
    fn lane_plan(&self, var: crate::ir::VarId, body: &[Stmt]) -> Option<vector::Plan> {
        if !self.k.vectorized.contains(&var) {
            return None;
        }
        let plan = vector::plan(self.k, var, body).ok()?;
        let mut tested = true;
        for s in body {
            if let Stmt::Store { buf, index, .. } = s {
                tested &= self.unchecked.iter().any(|a| a.is(*buf, index));
            }
            for e in s.own_exprs() {
                e.visit(&mut |x| {
                    if let Expr::Load { buf, index } = x {
                        tested &= self.unchecked.iter().any(|a| a.is(*buf, index));
                    }
                });
            }
        }
        // Accumulators kept in stack slots (cold) stay scalar: they are rare-path state.
        let in_registers = plan
            .reductions
            .iter()
            .all(|r| self.slots[r.var.0 as usize].is_none());
        (tested && in_registers).then_some(plan)
    }

    /// `for var = start; stop - var >= LANES; var += LANES` over the body in lanes; returns
    /// where the scalar tail starts. Each reduction keeps one partial result per lane,
    /// starting from the variable's value in lane 0 and the operator's identity in the others,
    /// combined into the variable after the loop (`ir::vector`: exact for integers, `min`
    /// and `max`; float sums and products reassociated).
    fn vector_loop(
        &mut self,
        var: crate::ir::VarId,
        start: Value,
        stop: Value,
        body: &[Stmt],
        plan: &vector::Plan,
    ) -> Value {
        let v = self.vars[var.0 as usize];
        self.b.def_var(v, start);
        let mut accs = vec![];
        for r in &plan.reductions {
            let vt = lanes_of(r.ty);
            let acc = self.b.declare_var(vt);
            let id = match (r.ty, r.op) {
                (ElemType::F64, BinOp::Add) => Scalar::F64(-0.0),
                (ElemType::F64, BinOp::Mul) => Scalar::F64(1.0),
                (ElemType::F64, BinOp::Min) => Scalar::F64(f64::INFINITY),
                (ElemType::F64, _) => Scalar::F64(f64::NEG_INFINITY),
                (_, BinOp::Mul) => Scalar::I64(1),
                (_, BinOp::Min) => Scalar::I64(i64::MAX),
                (_, BinOp::Max) => Scalar::I64(i64::MIN),
                (_, BinOp::And) => Scalar::I64(-1),
                _ => Scalar::I64(0),
            };
            let id = self.expr(&Expr::Const(id));
            let lanes = self.b.ins().splat(vt, id);
            let first = self.b.use_var(self.vars[r.var.0 as usize]);
            let init = self.b.ins().insertlane(lanes, first, 0);
            self.b.def_var(acc, init);
            accs.push((*r, acc));
        }
        let (head, blk, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let i = self.b.use_var(v);
        // `i < stop` first: then `i >= 0` (the range test passed), so `stop - i` cannot wrap.
        let some = self.b.ins().icmp(IntCC::SignedLessThan, i, stop);
        let left = self.b.ins().isub(stop, i);
        let full = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, left, vector::LANES);
        let go = self.b.ins().band(some, full);
        self.b.ins().brif(go, blk, &[], exit, &[]);
        self.b.switch_to_block(blk);
        let i = self.b.use_var(v);
        for s in body {
            match s {
                Stmt::Store { buf, index, value } => {
                    let x = self.lanes(value);
                    // `i` plus an invariant part (`ir::vector`), at the lanes' first iteration.
                    let at = self.expr(index);
                    let addr = self.address(*buf, at);
                    self.b.ins().store(lane_flags(), x, addr, 0);
                }
                Stmt::Assign(acc, Expr::Binary(op, a, b)) => {
                    let operand = if **a == Expr::Var(*acc) { b } else { a };
                    let x = self.lanes(operand);
                    let (r, lanes) = *accs
                        .iter()
                        .find(|(r, _)| r.var == *acc)
                        .expect("a planned reduction");
                    let old = self.b.use_var(lanes);
                    let new = self.lane_binary(*op, r.ty, old, x);
                    self.b.def_var(lanes, new);
                }
                _ => {}
            }
        }
        let next = self.b.ins().iadd_imm_s(i, vector::LANES);
        self.b.def_var(v, next);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
        for (r, lanes) in accs {
            let x = self.b.use_var(lanes);
            let l0 = self.b.ins().extractlane(x, 0);
            let l1 = self.b.ins().extractlane(x, 1);
            let sum = self.binary(r.op, r.ty, l0, l1);
            self.b.def_var(self.vars[r.var.0 as usize], sum);
        }
        self.b.use_var(v)
    }

    /// An expression of the lanes' class (`ir::vector`) at the loop variable's iteration and
    /// the next.
    fn lanes(&mut self, e: &Expr) -> Value {
        let ty = self.k.type_of(e);
        match e {
            Expr::Const(_) | Expr::Var(_) => {
                let x = self.expr(e);
                self.b.ins().splat(lanes_of(ty), x)
            }
            Expr::Load { buf, index } => {
                let at = self.expr(index);
                let addr = self.address(*buf, at);
                match self.k.buf_elem(*buf) {
                    ElemType::I32 => self.b.ins().sload32x2(lane_flags(), addr, 0),
                    _ => self.b.ins().load(lanes_of(ty), lane_flags(), addr, 0),
                }
            }
            Expr::Unary(op, a) => {
                let x = self.lanes(a);
                let ins = self.b.ins();
                match (op, ty) {
                    (UnOp::Neg, ElemType::F64) => ins.fneg(x),
                    (UnOp::Abs, _) => ins.fabs(x),
                    (UnOp::Sqrt, _) => ins.sqrt(x),
                    _ => ins.ineg(x),
                }
            }
            Expr::Binary(op, a, b) => {
                let x = self.lanes(a);
                let y = self.lanes(b);
                self.lane_binary(*op, ty, x, y)
            }
            _ => unreachable!("ir::vector::plan admits no {e:?}"),
        }
    }

    /// `op` lane by lane, with the scalar `binary`'s semantics in each lane.
    fn lane_binary(&mut self, op: BinOp, ty: ElemType, x: Value, y: Value) -> Value {
        use BinOp::*;
        let ins = self.b.ins();
        match (op, ty) {
            (Add, ElemType::F64) => ins.fadd(x, y),
            (Sub, ElemType::F64) => ins.fsub(x, y),
            (IeeeMul, _) => ins.fmul(x, y),
            (Div, _) => ins.fdiv(x, y),
            // WebAssembly's rules lane by lane, as the scalar `fmin`/`fmax`.
            (Min, ElemType::F64) => ins.fmin(x, y),
            (Max, ElemType::F64) => ins.fmax(x, y),
            (Mul, ElemType::F64) => {
                // The strong zero: a lane with a zero factor is +0.0 whatever the other.
                let product = ins.fmul(x, y);
                let zero = self.b.ins().f64const(0.0);
                let zero = self.b.ins().splat(types::F64X2, zero);
                let zx = self.b.ins().fcmp(FloatCC::Equal, x, zero);
                let zy = self.b.ins().fcmp(FloatCC::Equal, y, zero);
                let either = self.b.ins().bor(zx, zy);
                // A bitcast between vector types takes the lanes' byte order (and no other flag).
                let little =
                    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
                let mask = self.b.ins().bitcast(types::F64X2, little, either);
                self.b.ins().band_not(product, mask)
            }
            (Add, _) => ins.iadd(x, y),
            (Sub, _) => ins.isub(x, y),
            (Mul, _) => ins.imul(x, y),
            (Min | Max, _) => {
                let cc = if op == Min {
                    IntCC::SignedLessThan
                } else {
                    IntCC::SignedGreaterThan
                };
                let c = ins.icmp(cc, x, y);
                self.b.ins().bitselect(c, x, y)
            }
            (And, _) => ins.band(x, y),
            (Or, _) => ins.bor(x, y),
            (Xor, _) => ins.bxor(x, y),
            _ => unreachable!("ir::vector::plan admits no lane {op:?} on {ty}"),
        }
    }

    /// Whether a loop over `[start, stop)` is empty or keeps every access in its buffer: for
    /// `buf[i + w + c]`, `start + w + c >= 0` and `stop + w + c <= len`; for a gather whose
    /// index holds values in `0..below`, `0 < below <= len`. With a base `w` (any
    /// value) the sums are taken in 128 bits; without, `c` is small and `len >= 0`, so
    /// `start >= -c` and `stop <= len - c` cannot overflow.
    fn ranges_fit(&mut self, accesses: &[Access], start: Value, stop: Value) -> Value {
        let mut ok = self
            .b
            .ins()
            .icmp(IntCC::SignedGreaterThanOrEqual, start, stop);
        let mut all = None;
        for a in accesses {
            // A comparison decided by the test, not an access: `bound > hi`.
            if let At::Under { bound, hi, .. } = a.at {
                let d = self.expr(&Expr::Var(bound));
                let fits = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, d, hi);
                all = Some(match all {
                    Some(x) => self.b.ins().band(x, fits),
                    None => fits,
                });
                continue;
            }
            let len = self.b.use_var(self.blen[a.buf.0 as usize]);
            let fits = match a.at {
                At::Shifted {
                    base: None, offset, ..
                } => {
                    let lo =
                        self.b
                            .ins()
                            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, start, -offset);
                    let room = self.b.ins().iadd_imm_s(len, -offset);
                    let hi = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, stop, room);
                    self.b.ins().band(lo, hi)
                }
                At::Shifted {
                    base: Some(w),
                    offset,
                    ..
                } => {
                    let w = self.expr(&Expr::Var(w));
                    let wide = |e: &mut Self, x: Value| e.b.ins().sextend(types::I128, x);
                    let c = self.int(offset);
                    let (s, e, w, c, n) = (
                        wide(self, start),
                        wide(self, stop),
                        wide(self, w),
                        wide(self, c),
                        wide(self, len),
                    );
                    let shift = self.b.ins().iadd(w, c);
                    let lo = self.b.ins().iadd(s, shift);
                    let hi = self.b.ins().iadd(e, shift);
                    let zero = self.b.ins().iconst(types::I64, 0);
                    let zero = wide(self, zero);
                    let lo = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, lo, zero);
                    let hi = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, hi, n);
                    self.b.ins().band(lo, hi)
                }
                // Every value of the index is in `0..below` once `below` is positive.
                At::Gathered { below, .. } => {
                    // `0 < x <= len` as one unsigned compare of `x - 1` (`len >= 0`).
                    let x = self.b.use_var(self.belows[below]);
                    let x = self.b.ins().iadd_imm_s(x, -1);
                    self.b.ins().icmp(IntCC::UnsignedLessThan, x, len)
                }
                // The same past a kept start: `0 <= base <= len` and then
                // `x - 1 < len - base` unsigned (no overflow).
                At::InRow { base, below, .. } => {
                    let w = self.expr(&Expr::Var(base));
                    let lo = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, w, 0);
                    let hi = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, w, len);
                    let room = self.b.ins().isub(len, w);
                    let x = self.b.use_var(self.belows[below]);
                    let x = self.b.ins().iadd_imm_s(x, -1);
                    let fits = self.b.ins().icmp(IntCC::UnsignedLessThan, x, room);
                    let lo = self.b.ins().band(lo, hi);
                    self.b.ins().band(lo, fits)
                }
                // The same for every run of the loop (module docs of `versioning`):
                // `0 < x` and `x - 1 <= len - c`, no overflow for `x`, `c >= 0`.
                At::Between { offset, below, .. } => {
                    let x = self.b.use_var(self.belows[below]);
                    let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, x, 0);
                    let last = self.b.ins().iadd_imm_s(x, -1);
                    let room = self.b.ins().iadd_imm_s(len, -offset);
                    let fits = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, last, room);
                    self.b.ins().band(pos, fits)
                }
                // The index is in `[lo, hi]`, `0 <= lo`: `hi < len`.
                At::Ranged { hi, .. } => self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, len, hi),
                At::Under { .. } => unreachable!("handled above"),
                // Before a walk (`walked`): `var >= 0` and `stop <= len`.
                At::Walked { var, stop } => {
                    let q = self.expr(&Expr::Var(var));
                    let e = self.expr(&Expr::Var(stop));
                    let lo = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, q, 0);
                    let hi = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, e, len);
                    self.b.ins().band(lo, hi)
                }
            };
            all = Some(match all {
                Some(x) => self.b.ins().band(x, fits),
                None => fits,
            });
        }
        if let Some(all) = all {
            ok = self.b.ins().bor(ok, all);
        }
        ok
    }

    fn address(&mut self, buf: BufId, index: Value) -> Value {
        let size = self.k.buf_elem(buf).size() as i64;
        let ptr = self.b.use_var(self.bptr[buf.0 as usize]);
        let off = if size == 1 {
            index
        } else {
            self.b.ins().ishl_imm_s(index, size.trailing_zeros() as i64)
        };
        self.b.ins().iadd(ptr, off)
    }

    /// Check that the range `[lo, hi)` lies inside `buf` when it is not empty.
    fn guard_range(&mut self, buf: BufId, lo: Value, hi: Value) {
        let len = self.b.use_var(self.blen[buf.0 as usize]);
        let empty = self.b.ins().icmp(IntCC::SignedGreaterThanOrEqual, lo, hi);
        let lo_ok = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, lo, 0);
        let hi_ok = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, hi, len);
        let inside = self.b.ins().band(lo_ok, hi_ok);
        let ok = self.b.ins().bor(empty, inside);
        let last = self.b.ins().iadd_imm_s(hi, -1);
        let report = self.b.ins().select(lo_ok, last, lo);
        self.guard(ok, buf, report);
    }

    fn load(&mut self, buf: BufId, addr: Value) -> Value {
        let ins = self.b.ins();
        match self.k.buf_elem(buf) {
            ElemType::Bool => ins.load(types::I8, flags(), addr, 0),
            ElemType::U8 => ins.uload8(types::I64, flags(), addr, 0),
            ElemType::I8 => ins.sload8(types::I64, flags(), addr, 0),
            ElemType::I32 => ins.sload32(flags(), addr, 0),
            ElemType::I64 | ElemType::U64 => ins.load(types::I64, flags(), addr, 0),
            ElemType::F32 => {
                let x = ins.load(types::F32, flags(), addr, 0);
                self.b.ins().fpromote(types::F64, x)
            }
            ElemType::F64 => ins.load(types::F64, flags(), addr, 0),
            ElemType::Limit => unreachable!("checked IR has no buffer of points"),
        }
    }

    /// Narrow a compute-type value to the buffer's element type and store it.
    fn store(&mut self, buf: BufId, addr: Value, v: Value) {
        let ins = self.b.ins();
        match self.k.buf_elem(buf) {
            ElemType::Bool | ElemType::I64 | ElemType::U64 | ElemType::F64 => {
                ins.store(flags(), v, addr, 0)
            }
            ElemType::U8 | ElemType::I8 => ins.istore8(flags(), v, addr, 0),
            ElemType::I32 => ins.istore32(flags(), v, addr, 0),
            ElemType::F32 => {
                let x = ins.fdemote(types::F32, v);
                self.b.ins().store(flags(), x, addr, 0)
            }
            ElemType::Limit => unreachable!("checked IR has no buffer of points"),
        };
    }

    /// `Stmt::Atomic`: `*addr = op(*addr, v)` as one indivisible update of `buf`'s element.
    /// Integer `+` (any width: it commutes with the narrowing store) is one `atomic_rmw`;
    /// the rest loop on `atomic_cas` over the element's bits, computing exactly what the
    /// plain `Store` of `Binary(op, Load, v)` computes, so NaN, -0.0 and wrapping come out
    /// as serially. An update that leaves the bits as they are stores nothing: most updates
    /// of an idempotent reducer (`min max & |`: a relaxation's distances that do not
    /// improve, a flag already set) are then a plain load and compare, no locked instruction,
    /// which a native `atomic_rmw` or/smin would always be.
    /// No ordering beyond atomicity is needed (Cranelift's atomics are sequentially
    /// consistent anyway): the chunks' join is the barrier before anything reads the buffer.
    fn atomic_update(&mut self, buf: BufId, op: BinOp, addr: Value, v: Value) {
        let elem = self.k.buf_elem(buf);
        let mem = match elem {
            ElemType::Bool | ElemType::U8 | ElemType::I8 => types::I8,
            ElemType::I32 | ElemType::F32 => types::I32,
            _ => types::I64,
        };
        let int = !matches!(elem, ElemType::F32 | ElemType::F64);
        if op == BinOp::Add && int {
            let v = if mem == types::I64 || elem == ElemType::Bool {
                v
            } else {
                self.b.ins().ireduce(mem, v)
            };
            self.b
                .ins()
                .atomic_rmw(mem, flags(), AtomicRmwOp::Add, addr, v);
            return;
        }
        let first = self.b.ins().atomic_load(mem, flags(), addr);
        let (head, swap, done) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.append_block_param(head, mem);
        self.b.ins().jump(head, &[BlockArg::Value(first)]);
        self.b.switch_to_block(head);
        let old = self.b.block_params(head)[0];
        // Widen the bits as `load` widens the element, combine, narrow as `store` narrows.
        let ins = self.b.ins();
        let wide = match elem {
            ElemType::Bool | ElemType::I64 | ElemType::U64 => old,
            ElemType::U8 => ins.uextend(types::I64, old),
            ElemType::I8 | ElemType::I32 => ins.sextend(types::I64, old),
            ElemType::F32 => {
                let f = ins.bitcast(types::F32, MemFlagsData::new(), old);
                self.b.ins().fpromote(types::F64, f)
            }
            ElemType::F64 => ins.bitcast(types::F64, MemFlagsData::new(), old),
            ElemType::Limit => unreachable!("checked IR has no buffer of points"),
        };
        let new = self.binary(op, elem.compute(), wide, v);
        let ins = self.b.ins();
        let new = match elem {
            ElemType::Bool | ElemType::I64 | ElemType::U64 => new,
            ElemType::U8 | ElemType::I8 | ElemType::I32 => ins.ireduce(mem, new),
            ElemType::F32 => {
                let f = ins.fdemote(types::F32, new);
                self.b.ins().bitcast(types::I32, MemFlagsData::new(), f)
            }
            ElemType::F64 => ins.bitcast(types::I64, MemFlagsData::new(), new),
            ElemType::Limit => unreachable!("checked IR has no buffer of points"),
        };
        let same = self.b.ins().icmp(IntCC::Equal, new, old);
        self.b.ins().brif(same, done, &[], swap, &[]);
        self.b.switch_to_block(swap);
        let seen = self.b.ins().atomic_cas(flags(), addr, old, new);
        let stored = self.b.ins().icmp(IntCC::Equal, seen, old);
        self.b
            .ins()
            .brif(stored, done, &[], head, &[BlockArg::Value(seen)]);
        self.b.switch_to_block(done);
    }

    /// `while (cond) body`; `break` in the body leaves it.
    fn while_loop(&mut self, cond: &Expr, body: &[Stmt]) {
        let (head, blk, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let c = self.expr(cond);
        self.b.ins().brif(c, blk, &[], exit, &[]);
        self.b.switch_to_block(blk);
        self.exits.push(exit);
        self.stmts(body);
        self.exits.pop();
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    /// `if c { then } else { otherwise }`, continuing after both.
    fn branch(
        &mut self,
        c: Value,
        then: impl FnOnce(&mut Self),
        otherwise: impl FnOnce(&mut Self),
    ) {
        let (tb, eb, merge) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().brif(c, tb, &[], eb, &[]);
        self.b.switch_to_block(tb);
        then(self);
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(eb);
        otherwise(self);
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(merge);
    }

    /// `for v = start; v < stop; v++ { body(v) }`; `break` in the body leaves this loop.
    fn counted_loop(
        &mut self,
        v: Variable,
        start: Value,
        stop: Value,
        body: impl FnOnce(&mut Self, Value),
    ) {
        self.b.def_var(v, start);
        let (head, blk, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let i = self.b.use_var(v);
        let c = self.b.ins().icmp(IntCC::SignedLessThan, i, stop);
        self.b.ins().brif(c, blk, &[], exit, &[]);
        self.b.switch_to_block(blk);
        self.exits.push(exit);
        let i = self.b.use_var(v);
        body(self, i);
        self.exits.pop();
        let i = self.b.use_var(v);
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.def_var(v, next);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            // Inside one kernel a parallel range is its serial loop: one chunk, the whole range.
            Stmt::Chunked(c) => {
                self.stmt(&Stmt::Assign(c.lo, c.start.clone()));
                self.stmt(&Stmt::Assign(c.hi, c.stop.clone()));
                for s in &c.body {
                    self.stmt(s);
                }
            }
            Stmt::Assign(v, e) => {
                let x = self.expr(e);
                if let Some(slot) = self.slots[v.0 as usize] {
                    self.b.ins().stack_store(types::I64, x, slot, 0);
                } else {
                    self.b.def_var(self.vars[v.0 as usize], x);
                }
            }
            Stmt::Store { buf, index, value } => {
                let i = self.expr(index);
                let v = self.expr(value);
                let addr = self.checked_element(*buf, index, i);
                self.store(*buf, addr, v);
            }
            Stmt::Atomic {
                buf,
                index,
                op,
                value,
            } => {
                let i = self.expr(index);
                let v = self.expr(value);
                let addr = self.checked_element(*buf, index, i);
                self.atomic_update(*buf, *op, addr, v);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(cond);
                self.branch(c, |e| e.stmts(then), |e| e.stmts(otherwise));
            }
            Stmt::For {
                var,
                start,
                stop,
                body,
            } => {
                let v = self.vars[var.0 as usize];
                let mut accesses = versioning::versionable(*var, start, stop, body, &self.gathers);
                // As the C backend: at most one loop with loops inside versioned on any path.
                let outer = accesses.is_empty() && !self.in_outer;
                if outer {
                    accesses =
                        versioning::outer_versionable(*var, start, stop, body, &self.gathers);
                }
                // What an enclosing versioned loop tested needs no second test.
                accesses.retain(|a| !self.unchecked.contains(a) && !self.failed.contains(a));
                let (pretested, accesses): (Vec<Access>, Vec<Access>) = accesses
                    .into_iter()
                    .partition(|a| self.pretested.contains(a));
                let start = self.expr(start);
                let stop = self.expr(stop);
                if accesses.is_empty() {
                    let saved = self.unchecked.len();
                    self.unchecked.extend(pretested);
                    self.counted_loop(v, start, stop, |e, _| e.stmts(body));
                    self.unchecked.truncate(saved);
                    return;
                }
                let fits = self.ranges_fit(&accesses, start, stop);
                // Three copies when gathers are among the accesses: their test alone fails
                // when the caller vouches for no coordinates (a matrix shared from NumPy), and
                // the middle copy then still runs the other accesses, a row's entries between
                // checked positions above all, unchecked.
                let (gathered, others): (Vec<Access>, Vec<Access>) = accesses
                    .iter()
                    .partition(|a| matches!(a.at, At::Gathered { .. } | At::InRow { .. }));
                let var = *var;
                self.in_outer |= outer;
                self.branch(
                    fits,
                    |e| e.unchecked_copy(var, (start, stop), body, &accesses, &pretested),
                    |e| {
                        if gathered.is_empty() || others.is_empty() {
                            let v = e.vars[var.0 as usize];
                            return e.counted_loop(v, start, stop, |e, _| e.stmts(body));
                        }
                        let fits = e.ranges_fit(&others, start, stop);
                        e.branch(
                            fits,
                            |e| {
                                let saved = e.failed.len();
                                e.failed.extend(gathered);
                                e.unchecked_copy(var, (start, stop), body, &others, &pretested);
                                e.failed.truncate(saved);
                            },
                            |e| {
                                let v = e.vars[var.0 as usize];
                                e.counted_loop(v, start, stop, |e, _| e.stmts(body))
                            },
                        )
                    },
                );
                if outer {
                    self.in_outer = false;
                }
            }
            Stmt::While { cond, body } => {
                let mut walked = walked::walked_versionable(cond, body);
                walked.retain(|a| !self.unchecked.contains(a) && !self.failed.contains(a));
                if walked.is_empty() {
                    self.while_loop(cond, body);
                } else {
                    // As the C backend: the walk without the checks its test covers, and the
                    // checked walk for bad positions.
                    let (zero, one) = (self.int(0), self.int(1));
                    let fits = self.ranges_fit(&walked, zero, one);
                    self.branch(
                        fits,
                        |e| {
                            let saved = e.unchecked.len();
                            e.unchecked.extend(walked.iter().copied());
                            e.while_loop(cond, body);
                            e.unchecked.truncate(saved);
                        },
                        |e| e.while_loop(cond, body),
                    );
                }
            }
            Stmt::Break => {
                let exit = *self
                    .exits
                    .last()
                    .expect("checked IR breaks only inside loops");
                self.b.ins().jump(exit, &[]);
                self.fresh_block();
            }
            Stmt::Grow { buf, len } => {
                let want = self.expr(len);
                // A buffer already long enough needs no call (appends grow geometrically, so
                // the call is rare).
                let have = self.b.use_var(self.blen[buf.0 as usize]);
                let short = self.b.ins().icmp(IntCC::SignedGreaterThan, want, have);
                let (slow, done) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(short, slow, &[], done, &[]);
                self.b.switch_to_block(slow);
                let f = self.int(abi::tessera_grow as *const () as usize as i64);
                let id = self.int(buf.0 as i64);
                let call = self
                    .b
                    .ins()
                    .call_indirect(self.sig_grow, f, &[self.state, id, want]);
                let rc = self.b.inst_results(call)[0];
                let (fail, cont) = (self.b.create_block(), self.b.create_block());
                self.b.ins().brif(rc, fail, &[], cont, &[]);
                self.b.switch_to_block(fail);
                self.b.ins().store(flags(), want, self.fault, 0);
                let code = self.int(GROW_BASE - buf.0 as i64);
                self.b.ins().return_(&[code]);
                self.b.switch_to_block(cont);
                self.reload(*buf);
                self.b.ins().jump(done, &[]);
                self.b.switch_to_block(done);
            }
            Stmt::Fill {
                buf,
                start,
                stop,
                value,
            } => {
                let (lo, hi) = (self.expr(start), self.expr(stop));
                let v = self.expr(value);
                self.guard_range(*buf, lo, hi);
                let i = self.b.declare_var(types::I64);
                self.counted_loop(i, lo, hi, |e, iv| {
                    let addr = e.address(*buf, iv);
                    e.store(*buf, addr, v);
                });
            }
            Stmt::Sort {
                buf,
                flags: Some(fl),
                lo,
                hi,
            } => {
                let (lo, hi) = (self.expr(lo), self.expr(hi));
                self.guard_range(*buf, lo, hi);
                let f = self.int(abi::tessera_sort_slots as *const () as usize as i64);
                let (id, fid) = (self.int(buf.0 as i64), self.int(fl.0 as i64));
                let call = self.b.ins().call_indirect(
                    self.sig_i6,
                    f,
                    &[self.state, id, fid, lo, hi, self.fault],
                );
                let rc = self.b.inst_results(call)[0];
                // The helper set the fault word and says which buffer failed: a slot outside
                // the flags, or the sorted buffer itself.
                let bad = self.b.ins().load(types::I64, flags(), self.fault, 0);
                let not_flags = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::NotEqual, rc, fl.0 as i64 + 1);
                self.guard(not_flags, *fl, bad);
                let ok = self.b.ins().icmp_imm_s(IntCC::Equal, rc, 0);
                self.guard(ok, *buf, bad);
            }
            Stmt::Sort {
                buf,
                flags: None,
                lo,
                hi,
            } => {
                let (lo, hi) = (self.expr(lo), self.expr(hi));
                self.guard_range(*buf, lo, hi);
                let f = self.int(abi::tessera_sort as *const () as usize as i64);
                let id = self.int(buf.0 as i64);
                let call = self
                    .b
                    .ins()
                    .call_indirect(self.sig_i4, f, &[self.state, id, lo, hi]);
                let rc = self.b.inst_results(call)[0];
                // The range was checked, so a failure can only be the buffer itself.
                let ok = self.b.ins().icmp_imm_s(IntCC::Equal, rc, 0);
                self.guard(ok, *buf, lo);
            }
            Stmt::SortPerm { keys, perm, lo, hi } => {
                let (lo, hi) = (self.expr(lo), self.expr(hi));
                self.guard_range(*perm, lo, hi);
                let f = self.int(abi::tessera_sort_perm as *const () as usize as i64);
                let (k, p) = (self.int(keys.0 as i64), self.int(perm.0 as i64));
                let call = self.b.ins().call_indirect(
                    self.sig_i6,
                    f,
                    &[self.state, k, p, lo, hi, self.fault],
                );
                let rc = self.b.inst_results(call)[0];
                let ok = self.b.ins().icmp_imm_s(IntCC::Equal, rc, 0);
                let bad = self.b.ins().load(types::I64, flags(), self.fault, 0);
                self.guard(ok, *keys, bad);
            }
            Stmt::Fail(k) => {
                let code = self.int(*k as i64 + 1);
                self.b.ins().return_(&[code]);
                self.fresh_block();
            }
            Stmt::Comment(_) => {}
        }
    }

    fn call_f64(&mut self, f: usize, args: &[Value]) -> Value {
        let sig = if args.len() == 1 {
            self.sig_f1
        } else {
            self.sig_f2
        };
        let callee = self.int(f as i64);
        let call = self.b.ins().call_indirect(sig, callee, args);
        self.b.inst_results(call)[0]
    }

    fn expr(&mut self, e: &Expr) -> Value {
        match e {
            Expr::Const(s) => match *s {
                Scalar::Bool(x) => self.b.ins().iconst(types::I8, x as i64),
                Scalar::F64(x) => self.b.ins().f64const(x),
                Scalar::Limit(p) => self.limit_const(p),
                s => self.int(s.as_i64()),
            },
            Expr::Var(v) => match self.slots[v.0 as usize] {
                Some(slot) => {
                    let ty = clif(self.k.var_ty(*v));
                    self.b.ins().stack_load(types::I64, ty, slot, 0)
                }
                None => self.b.use_var(self.vars[v.0 as usize]),
            },
            Expr::Load { buf, index } => {
                let i = self.expr(index);
                let addr = self.checked_element(*buf, index, i);
                self.load(*buf, addr)
            }
            Expr::Len(buf) => self.b.use_var(self.blen[buf.0 as usize]),
            Expr::Unary(op, a) => {
                let ty = self.k.type_of(a);
                let x = self.expr(a);
                if ty == ElemType::Limit {
                    return self.limit_unary(*op, x);
                }
                let ins = self.b.ins();
                match (op, ty) {
                    (UnOp::Neg, ElemType::F64) => ins.fneg(x),
                    (UnOp::Neg, _) => ins.ineg(x),
                    (UnOp::Not, ElemType::Bool) => ins.bxor_imm_s(x, 1),
                    (UnOp::Not, _) => ins.bnot(x),
                    (UnOp::Abs, ElemType::F64) => ins.fabs(x),
                    (UnOp::Abs, _) => ins.iabs(x),
                    (UnOp::Sqrt, _) => ins.sqrt(x),
                    (UnOp::Floor, _) => ins.floor(x),
                    (UnOp::Exp, _) => self.call_f64(abi::tessera_exp as *const () as usize, &[x]),
                    (UnOp::Log, _) => self.call_f64(abi::tessera_log as *const () as usize, &[x]),
                    (UnOp::Math(f), _) => self.call_f64(f.pointer() as usize, &[x]),
                    (UnOp::After, _) => ins.iadd_imm_s(x, 1),
                    (UnOp::Before, _) => ins.iadd_imm_s(x, -1),
                    (UnOp::LimitVal | UnOp::LimitEps, t) => {
                        unreachable!("checked IR has no {op:?} on {t}")
                    }
                }
            }
            Expr::Binary(op, a, b) => {
                if versioning::known_in_bounds(&self.unchecked, *op, a, b) {
                    return self.b.ins().iconst(types::I8, 1);
                }
                if let Some(x) =
                    versioning::decided(self.k, &self.gathers, &self.unchecked, *op, a, b)
                {
                    return self.b.ins().iconst(types::I8, i64::from(x));
                }
                let ty = self.k.type_of(a);
                let x = self.expr(a);
                let y = self.expr(b);
                self.binary(*op, ty, x, y)
            }
            Expr::MakeLimit(v, e) => {
                let (v, e) = (self.expr(v), self.expr(e));
                self.make_limit(v, e)
            }
            Expr::Select(c, a, b) => {
                let branchless = crate::ir::walk::branchless_select(self.k, c, a, b);
                let (c, x, y) = (self.expr(c), self.expr(a), self.expr(b));
                if self.k.type_of(a) == ElemType::Limit {
                    self.select_limit(c, x, y)
                } else if branchless {
                    // Cranelift picks between floats with a jump over a move; between
                    // integers with a `cmov`, which data cannot mispredict.
                    let flags = MemFlagsData::new();
                    let xi = self.b.ins().bitcast(types::I64, flags, x);
                    let yi = self.b.ins().bitcast(types::I64, flags, y);
                    let r = self.b.ins().select(c, xi, yi);
                    self.b.ins().bitcast(types::F64, flags, r)
                } else {
                    self.b.ins().select(c, x, y)
                }
            }
            Expr::Cast(to, a) => {
                let from = self.k.type_of(a);
                let x = self.expr(a);
                self.cast(from, *to, x)
            }
            Expr::SearchGe { buf, lo, hi, key } => {
                let (lo, hi, key) = (self.expr(lo), self.expr(hi), self.expr(key));
                self.search_ge(*buf, lo, hi, key)
            }
            Expr::HashFind { table, key } => {
                let key = self.expr(key);
                let f = self.int(abi::tessera_hash_find as *const () as usize as i64);
                let id = self.int(table.0 as i64);
                let call = self
                    .b
                    .ins()
                    .call_indirect(self.sig_grow, f, &[self.state, id, key]);
                self.b.inst_results(call)[0]
            }
        }
    }

    /// `x * y` where a zero factor gives `+0.0` even against NaN, an infinity or a negative
    /// factor (`ir::BinOp::Mul`): only a NaN or zero product can differ from IEEE, so the
    /// factors are tested in a cold block reached from those rare cases alone.
    fn strong_zero_mul(&mut self, x: Value, y: Value) -> Value {
        let product = self.b.ins().fmul(x, y);
        // NaN or ±0 (one compare): the only products a zero factor can change.
        let zero = self.b.ins().f64const(0.0);
        let nan = self.b.ins().fcmp(FloatCC::UnorderedOrEqual, product, zero);
        let (fix, merge) = (self.b.create_block(), self.b.create_block());
        self.b.append_block_param(merge, types::F64);
        self.b
            .ins()
            .brif(nan, fix, &[], merge, &[BlockArg::Value(product)]);
        self.b.set_cold_block(fix);
        self.b.switch_to_block(fix);
        let zx = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        let zy = self.b.ins().fcmp(FloatCC::Equal, y, zero);
        let either = self.b.ins().bor(zx, zy);
        let fixed = self.b.ins().select(either, zero, product);
        self.b.ins().jump(merge, &[BlockArg::Value(fixed)]);
        self.b.switch_to_block(merge);
        self.b.block_params(merge)[0]
    }

    fn binary(&mut self, op: BinOp, ty: ElemType, x: Value, y: Value) -> Value {
        use BinOp::*;
        let float = ty == ElemType::F64;
        let ins = self.b.ins();
        match op {
            Add if float => ins.fadd(x, y),
            Sub if float => ins.fsub(x, y),
            Mul if float => self.strong_zero_mul(x, y),
            IeeeMul => ins.fmul(x, y),
            Div if float => ins.fdiv(x, y),
            Rem if float => self.call_f64(abi::tessera_fmod as *const () as usize, &[x, y]),
            Math(f) => self.call_f64(f.pointer() as usize, &[x, y]),
            // WebAssembly's rules: NaN from either side, -0.0 below 0.0 (IEEE 754-2019).
            Min if float => ins.fmin(x, y),
            Max if float => ins.fmax(x, y),
            Min | Max if ty == ElemType::Limit => {
                let cc = if op == Min {
                    IntCC::SignedLessThan
                } else {
                    IntCC::SignedGreaterThan
                };
                let c = ins.icmp(cc, y, x);
                self.select_limit(c, y, x)
            }
            Add => ins.iadd(x, y),
            Sub => ins.isub(x, y),
            Mul => ins.imul(x, y),
            Div | Rem => self.safe_div(op, x, y),
            Min => ins.smin(x, y),
            Max => ins.smax(x, y),
            Eq | Ne | Lt | Le | Gt | Ge if float => {
                let cc = match op {
                    Eq => FloatCC::Equal,
                    Ne => FloatCC::NotEqual,
                    Lt => FloatCC::LessThan,
                    Le => FloatCC::LessThanOrEqual,
                    Gt => FloatCC::GreaterThan,
                    _ => FloatCC::GreaterThanOrEqual,
                };
                ins.fcmp(cc, x, y)
            }
            Eq | Ne | Lt | Le | Gt | Ge => {
                let cc = match op {
                    Eq => IntCC::Equal,
                    Ne => IntCC::NotEqual,
                    Lt => IntCC::SignedLessThan,
                    Le => IntCC::SignedLessThanOrEqual,
                    Gt => IntCC::SignedGreaterThan,
                    _ => IntCC::SignedGreaterThanOrEqual,
                };
                ins.icmp(cc, x, y)
            }
            And => ins.band(x, y),
            Or => ins.bor(x, y),
            Xor => ins.bxor(x, y),
            // Cranelift takes shift amounts modulo the bit width, as the IR specifies.
            Shl => ins.ishl(x, y),
            Shr => ins.sshr(x, y),
        }
    }

    /// Integer `/` and `%` that never trap: by 0 gives 0, and `MIN / -1` wraps to `MIN`.
    fn safe_div(&mut self, op: BinOp, x: Value, y: Value) -> Value {
        let zero = self.int(0);
        let one = self.int(1);
        let is_zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        let is_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let special = self.b.ins().bor(is_zero, is_m1);
        let d = self.b.ins().select(special, one, y);
        let (q, m1) = if op == BinOp::Div {
            (self.b.ins().sdiv(x, d), self.b.ins().ineg(x))
        } else {
            (self.b.ins().srem(x, d), zero)
        };
        let r = self.b.ins().select(is_m1, m1, q);
        self.b.ins().select(is_zero, zero, r)
    }

    fn cast(&mut self, from: ElemType, to: ElemType, x: Value) -> Value {
        let ins = self.b.ins();
        match (from, to) {
            _ if from == to => x,
            (ElemType::I64, ElemType::F64) => ins.fcvt_from_sint(types::F64, x),
            (ElemType::F64, ElemType::I64) => ins.fcvt_to_sint_sat(types::I64, x),
            (ElemType::Bool, ElemType::I64) => ins.uextend(types::I64, x),
            (ElemType::Bool, _) => {
                let i = ins.uextend(types::I64, x);
                self.b.ins().fcvt_from_sint(types::F64, i)
            }
            (ElemType::I64, ElemType::Bool) => ins.icmp_imm_s(IntCC::NotEqual, x, 0),
            (_, ElemType::Bool) => {
                let z = ins.f64const(0.0);
                self.b.ins().fcmp(FloatCC::NotEqual, x, z)
            }
            (f, t) => unreachable!("checked IR has no cast from {f} to {t}"),
        }
    }

    /// Inline binary search: the first position in `[lo, hi)` whose element is `>= key`.
    fn search_ge(&mut self, buf: BufId, lo: Value, hi: Value, key: Value) -> Value {
        self.guard_range(buf, lo, hi);
        let (l, h) = (
            self.b.declare_var(types::I64),
            self.b.declare_var(types::I64),
        );
        self.b.def_var(l, lo);
        self.b.def_var(h, hi);
        let (head, blk, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(head);
        let (lv, hv) = (self.b.use_var(l), self.b.use_var(h));
        let c = self.b.ins().icmp(IntCC::SignedLessThan, lv, hv);
        self.b.ins().brif(c, blk, &[], exit, &[]);
        self.b.switch_to_block(blk);
        let (lv, hv) = (self.b.use_var(l), self.b.use_var(h));
        let span = self.b.ins().isub(hv, lv);
        let half = self.b.ins().sshr_imm_s(span, 1);
        let mid = self.b.ins().iadd(lv, half);
        let addr = self.address(buf, mid);
        let x = self.load(buf, addr);
        let below = self.b.ins().icmp(IntCC::SignedLessThan, x, key);
        let mid1 = self.b.ins().iadd_imm_s(mid, 1);
        let nl = self.b.ins().select(below, mid1, lv);
        let nh = self.b.ins().select(below, hv, mid);
        self.b.def_var(l, nl);
        self.b.def_var(h, nh);
        self.b.ins().jump(head, &[]);
        self.b.switch_to_block(exit);
        self.b.use_var(l)
    }
}
