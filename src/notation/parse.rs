//! The text front end: a hand-written lexer and a recursive-descent parser with precedence
//! climbing for binary operators.
//!
//! The parser never panics: every malformed input becomes an [`Error::Syntax`] naming the
//! line:column of the offending token, what was expected and what was found. Nesting is bounded
//! (see [`MAX_NESTING`] and [`MAX_EXPR_DEPTH`]) so that hostile input cannot overflow the stack,
//! either here or later when the AST is dropped, compared or printed.

use super::ast::*;
use crate::error::{Error, Result};
use crate::types::Scalar;

/// How deeply statements, parentheses, unary operators, calls and accesses may nest.
const MAX_NESTING: usize = 100;
/// How deep an expression tree may get; left-associative chains (`a + b + c ...`) deepen the
/// tree without deepening the parser's recursion, so they are bounded separately.
const MAX_EXPR_DEPTH: usize = 1000;

/// Words that can never be names.
pub const KEYWORDS: &[&str] = &[
    "for", "if", "else", "let", "begin", "end", "true", "false", "Inf", "NaN", "missing", "xor",
];

pub fn is_keyword(s: &str) -> bool {
    KEYWORDS.contains(&s)
}

/// Parse a whole program.
pub fn parse_program(text: &str) -> Result<Program> {
    let mut p = Parser::new(text)?;
    let body = p.stmts()?;
    match p.peek() {
        Tok::Eof => Ok(Program { body }),
        Tok::Ident(w) if w == "end" => {
            Err(p.err_here("`end` without a matching `for`, `if`, `let` or `begin`"))
        }
        Tok::Ident(w) if w == "else" => Err(p.err_here("`else` without a matching `if`")),
        _ => Err(p.expected("a statement")),
    }
}

/// Parse a single expression (surrounding blank lines and comments are allowed).
pub fn parse_expr(text: &str) -> Result<Expr> {
    let mut p = Parser::new(text)?;
    p.skip_newlines();
    let (e, _) = p.expr()?;
    p.skip_newlines();
    match p.peek() {
        Tok::Eof => Ok(e),
        _ => Err(p.expected("end of input after the expression")),
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// Names and keywords (keywords are recognised by the parser so that messages can quote
    /// them).
    Ident(String),
    /// A decimal integer without sign; the range check waits for the parser because `-` may
    /// fold into it (`-9223372036854775808`).
    Int(u64),
    Float(f64),
    /// `0x..`, already checked to fit a `u8`.
    Hex(u8),
    /// Punctuation and operators, spelled as in the source.
    Punct(&'static str),
    Newline,
    Eof,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    span: Span,
}

/// Longest first, so that e.g. `<<` wins over `<` and `>>=` over `>>`.
const PUNCTS: &[&str] = &[
    ">>=", ".=", "+=", "-=", "*=", "&=", "|=", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "+",
    "-", "*", "/", "%", "<", ">", "&", "|", "!", "~", "=", "(", ")", "[", "]", ",", ";", ":", "@",
];

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(w) if is_keyword(w) => format!("`{w}`"),
        Tok::Ident(w) => format!("name `{w}`"),
        Tok::Int(v) => format!("number `{v}`"),
        Tok::Float(v) => format!("number `{}`", Scalar::F64(*v)),
        Tok::Hex(v) => format!("number `0x{v:02x}`"),
        Tok::Punct(p) => format!("`{p}`"),
        Tok::Newline => "end of line".to_string(),
        Tok::Eof => "end of input".to_string(),
    }
}

fn lex(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    // Newlines inside brackets do not end statements, so long index lists and call argument
    // lists may be split across lines.
    let mut brackets = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let span = Span::new(line, col);
        let start = i;
        if c == '\n' {
            if brackets == 0 {
                toks.push(Token {
                    tok: Tok::Newline,
                    span,
                });
            }
            i += 1;
            line = line.saturating_add(1);
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col = col.saturating_add(1);
            continue;
        }
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
                col = col.saturating_add(1);
            }
            continue;
        }
        let tok = if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Tok::Ident(chars[start..i].iter().collect())
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let (tok, end) = lex_number(&chars, i).map_err(|msg| Error::syntax(span, msg))?;
            i = end;
            tok
        } else if let Some(p) = PUNCTS.iter().find(|p| {
            p.chars()
                .enumerate()
                .all(|(k, pc)| chars.get(i + k) == Some(&pc))
        }) {
            i += p.len();
            match *p {
                "(" | "[" => brackets += 1,
                ")" | "]" => brackets = brackets.saturating_sub(1),
                _ => {}
            }
            Tok::Punct(p)
        } else {
            return Err(Error::syntax(
                span,
                format!("unexpected character `{}`", c.escape_debug()),
            ));
        };
        col = col.saturating_add((i - start) as u32);
        toks.push(Token { tok, span });
    }
    toks.push(Token {
        tok: Tok::Eof,
        span: Span::new(line, col),
    });
    Ok(toks)
}

/// Lex a number starting at `i`; returns the token and the index just past it.
fn lex_number(chars: &[char], start: usize) -> std::result::Result<(Tok, usize), String> {
    let mut i = start;
    let digits = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_ascii_digit() {
            *i += 1;
        }
    };
    let is_word = |c: Option<&char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_');
    if chars[i] == '0' && matches!(chars.get(i + 1), Some('x') | Some('X')) {
        i += 2;
        let h = i;
        while i < chars.len() && chars[i].is_ascii_hexdigit() {
            i += 1;
        }
        let text: String = chars[h..i].iter().collect();
        if text.is_empty() || is_word(chars.get(i)) {
            return Err("malformed hexadecimal literal (expected e.g. `0x1f`)".to_string());
        }
        let significant = text.trim_start_matches('0');
        if significant.len() > 2 {
            return Err(format!(
                "hexadecimal literal `0x{text}` does not fit in a u8 (at most 0xff)"
            ));
        }
        let v = if significant.is_empty() {
            Ok(0)
        } else {
            u8::from_str_radix(significant, 16)
        };
        return v
            .map(|v| (Tok::Hex(v), i))
            .map_err(|_| format!("malformed hexadecimal literal `0x{text}`"));
    }
    digits(&mut i);
    let mut float = false;
    if chars.get(i) == Some(&'.') {
        float = true;
        i += 1;
        digits(&mut i);
    }
    if matches!(chars.get(i), Some('e') | Some('E')) {
        let mut j = i + 1;
        if matches!(chars.get(j), Some('+') | Some('-')) {
            j += 1;
        }
        if chars.get(j).is_some_and(|c| c.is_ascii_digit()) {
            float = true;
            i = j;
            digits(&mut i);
        }
    }
    let text: String = chars[start..i].iter().collect();
    if is_word(chars.get(i)) || chars.get(i) == Some(&'.') {
        return Err(format!("malformed number starting `{text}`"));
    }
    if float {
        match text.parse::<f64>() {
            Ok(v) => Ok((Tok::Float(v), i)),
            Err(_) => Err(format!("malformed number `{text}`")),
        }
    } else {
        match text.parse::<u64>() {
            Ok(v) => Ok((Tok::Int(v), i)),
            Err(_) => Err(format!(
                "integer literal `{text}` is too large for a 64-bit integer"
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parser

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    nesting: usize,
}

/// The construct a body belongs to, for "expected `end` to close ..." messages.
struct Opener {
    what: &'static str,
    span: Span,
}

impl Parser {
    fn new(text: &str) -> Result<Parser> {
        Ok(Parser {
            toks: lex(text)?,
            pos: 0,
            nesting: 0,
        })
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    fn span(&self) -> Span {
        self.toks[self.pos.min(self.toks.len() - 1)].span
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos.min(self.toks.len() - 1)].clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(q) if q == w)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let yes = self.is_punct(p);
        if yes {
            self.bump();
        }
        yes
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Tok::Newline) {
            self.bump();
        }
    }

    fn err_here(&self, msg: impl Into<String>) -> Error {
        Error::syntax(self.span(), msg)
    }

    fn expected(&self, what: &str) -> Error {
        self.err_here(format!("expected {what}, found {}", describe(self.peek())))
    }

    fn expect_punct(&mut self, p: &str, context: &str) -> Result<Span> {
        if self.is_punct(p) {
            Ok(self.bump().span)
        } else {
            Err(self.expected(&format!("`{p}`{context}")))
        }
    }

    /// A name that may be bound or referred to: not a keyword and not the placeholder `_`.
    fn name(&mut self, what: &str) -> Result<(String, Span)> {
        match self.peek() {
            Tok::Ident(w) if !is_keyword(w) && w != "_" => {
                let t = self.bump();
                match t.tok {
                    Tok::Ident(w) => Ok((w, t.span)),
                    _ => Err(Error::syntax(t.span, "internal parser error")),
                }
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Guards every recursive descent so that deeply nested input is an error, not a crash.
    fn enter(&mut self) -> Result<()> {
        self.nesting += 1;
        if self.nesting > MAX_NESTING {
            return Err(self.err_here(format!("nesting deeper than {MAX_NESTING} levels")));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nesting -= 1;
    }

    // --- statements ---

    /// Statements up to (not including) `end`, `else` or end of input.
    fn stmts(&mut self) -> Result<Vec<Stmt>> {
        let mut out = Vec::new();
        loop {
            while matches!(self.peek(), Tok::Newline) || self.is_punct(";") {
                self.bump();
            }
            if matches!(self.peek(), Tok::Eof) || self.is_word("end") || self.is_word("else") {
                return Ok(out);
            }
            out.push(self.stmt()?);
            match self.peek() {
                Tok::Newline | Tok::Eof => {}
                Tok::Punct(";") => {}
                Tok::Ident(w) if w == "end" || w == "else" => {}
                _ => return Err(self.expected("end of line or `;` after the statement")),
            }
        }
    }

    /// A body closed by `end`.
    fn body_until_end(&mut self, opener: &Opener) -> Result<Vec<Stmt>> {
        let body = self.stmts()?;
        self.expect_end(opener)?;
        Ok(body)
    }

    fn expect_end(&mut self, opener: &Opener) -> Result<()> {
        if self.is_word("end") {
            self.bump();
            Ok(())
        } else {
            Err(self.expected(&format!(
                "`end` to close `{}` at {}",
                opener.what, opener.span
            )))
        }
    }

    fn stmt(&mut self) -> Result<Stmt> {
        self.enter()?;
        let r = self.stmt_inner();
        self.leave();
        r
    }

    fn stmt_inner(&mut self) -> Result<Stmt> {
        let span = self.span();
        let word = match self.peek() {
            Tok::Ident(w) => w.clone(),
            Tok::Punct("@") => return self.macro_stmt(),
            _ => return Err(self.expected("a statement")),
        };
        match word.as_str() {
            "for" => {
                self.bump();
                let opener = Opener { what: "for", span };
                let mut headers = Vec::new();
                loop {
                    let (index, ispan) = self.name("a loop index name")?;
                    self.expect_punct("=", " after the loop index")?;
                    let extent = self.extent()?;
                    headers.push((index, extent, ispan));
                    if !self.eat_punct(",") {
                        break;
                    }
                    self.skip_newlines();
                }
                let mut body = self.body_until_end(&opener)?;
                // `for i = _, j = _` is `i` outer, `j` inner; the outermost loop keeps the span
                // of `for`, inner ones the span of their index.
                for (k, (index, extent, ispan)) in headers.into_iter().enumerate().rev() {
                    let s = if k == 0 { span } else { ispan };
                    body = vec![Stmt::new(
                        StmtKind::Loop {
                            index,
                            extent,
                            body,
                        },
                        s,
                    )];
                }
                body.pop()
                    .ok_or_else(|| Error::syntax(span, "internal parser error"))
            }
            "if" => {
                self.bump();
                let opener = Opener { what: "if", span };
                let (cond, _) = self.expr()?;
                let then = self.stmts()?;
                let otherwise = if self.is_word("else") {
                    self.bump();
                    self.stmts()?
                } else {
                    Vec::new()
                };
                self.expect_end(&opener)?;
                Ok(Stmt::new(
                    StmtKind::If {
                        cond,
                        then,
                        otherwise,
                    },
                    span,
                ))
            }
            "let" => {
                self.bump();
                let opener = Opener { what: "let", span };
                let mut bindings = Vec::new();
                loop {
                    let (name, nspan) = self.name("a variable name")?;
                    self.expect_punct("=", " after the `let` variable")?;
                    self.skip_newlines();
                    let (value, _) = self.expr()?;
                    bindings.push((name, value, nspan));
                    if !self.eat_punct(",") {
                        break;
                    }
                    self.skip_newlines();
                }
                let mut body = self.body_until_end(&opener)?;
                for (k, (name, value, nspan)) in bindings.into_iter().enumerate().rev() {
                    let s = if k == 0 { span } else { nspan };
                    body = vec![Stmt::new(StmtKind::Let { name, value, body }, s)];
                }
                body.pop()
                    .ok_or_else(|| Error::syntax(span, "internal parser error"))
            }
            "begin" => {
                self.bump();
                let opener = Opener {
                    what: "begin",
                    span,
                };
                let body = self.body_until_end(&opener)?;
                Ok(Stmt::new(StmtKind::Block(body), span))
            }
            "end" | "else" => Err(self.expected("a statement")),
            w if is_keyword(w) || w == "_" => Err(self.expected("a statement")),
            _ => self.assignment(),
        }
    }

    fn macro_stmt(&mut self) -> Result<Stmt> {
        let span = self.bump().span;
        let (which, wspan) = match self.peek() {
            Tok::Ident(w) => (w.clone(), self.span()),
            _ => return Err(self.expected("`freeze` or `thaw` after `@`")),
        };
        if which != "freeze" && which != "thaw" {
            return Err(Error::syntax(
                wspan,
                format!("unknown statement `@{which}` (expected `@freeze` or `@thaw`)"),
            ));
        }
        self.bump();
        self.expect_punct("(", &format!(" after `@{which}`"))?;
        let (tensor, _) = self.name("a tensor name")?;
        self.expect_punct(")", &format!(" to close `@{which}(`"))?;
        let kind = if which == "freeze" {
            StmtKind::Freeze { tensor }
        } else {
            StmtKind::Thaw { tensor }
        };
        Ok(Stmt::new(kind, span))
    }

    fn extent(&mut self) -> Result<Extent> {
        if self.is_word("_") {
            self.bump();
            return Ok(Extent::Auto);
        }
        let (lo, _) = self.expr()?;
        self.expect_punct(":", " in the loop range `lo:hi` (or `_` to infer it)")?;
        let (hi, _) = self.expr()?;
        Ok(Extent::Range(lo, hi))
    }

    /// `T .= init`, `T[idx...] op rhs` or `s op rhs`.
    fn assignment(&mut self) -> Result<Stmt> {
        let (tensor, span) = self.name("a statement")?;
        if self.eat_punct(".=") {
            self.skip_newlines();
            let (init, _) = self.expr()?;
            return Ok(Stmt::new(StmtKind::Declare { tensor, init }, span));
        }
        let indices = if self.is_punct("[") {
            self.indices()?.0
        } else {
            Vec::new()
        };
        let lhs = Access {
            tensor,
            indices,
            span,
        };
        let op = self.assign_op()?;
        self.skip_newlines();
        let (rhs, _) = self.expr()?;
        Ok(Stmt::new(StmtKind::Assign { lhs, op, rhs }, span))
    }

    fn assign_op(&mut self) -> Result<AssignOp> {
        let simple = match self.peek() {
            Tok::Punct("=") => Some(AssignOp::Overwrite),
            Tok::Punct("+=") => Some(AssignOp::Reduce(Reducer::Add)),
            Tok::Punct("-=") => Some(AssignOp::Reduce(Reducer::Sub)),
            Tok::Punct("*=") => Some(AssignOp::Reduce(Reducer::Mul)),
            Tok::Punct("&=") => Some(AssignOp::Reduce(Reducer::And)),
            Tok::Punct("|=") => Some(AssignOp::Reduce(Reducer::Or)),
            Tok::Punct("<<") => None,
            _ => return Err(self.expected("an assignment operator (`=`, `+=`, `<<min>>=` ...)")),
        };
        self.bump();
        if let Some(op) = simple {
            return Ok(op);
        }
        let (name, nspan) = self.name("a reducer name after `<<`")?;
        let reducer = match name.as_str() {
            "min" => Reducer::Min,
            "max" => Reducer::Max,
            "and" => Reducer::And,
            "or" => Reducer::Or,
            "choose" => {
                self.expect_punct("(", " after `choose` (as in `<<choose(0)>>=`)")?;
                let vspan = self.span();
                let (v, _) = self.unary()?;
                let ExprKind::Literal(z) = v.kind else {
                    return Err(Error::syntax(
                        vspan,
                        "expected a literal value in `choose(...)`",
                    ));
                };
                self.expect_punct(")", " to close `choose(`")?;
                Reducer::Choose(z)
            }
            _ => Reducer::Named(name),
        };
        if !self.eat_punct(">>=") {
            return Err(self.expected(&format!("`>>=` to close the reducer opened at {nspan}")));
        }
        Ok(AssignOp::Reduce(reducer))
    }

    /// `[idx, ...]`; returns the indices and the depth of the deepest index expression.
    fn indices(&mut self) -> Result<(Vec<AccessIndex>, usize)> {
        self.expect_punct("[", "")?;
        let mut out = Vec::new();
        let mut depth = 0;
        if self.eat_punct("]") {
            return Ok((out, depth));
        }
        loop {
            let (ix, d) = self.index()?;
            depth = depth.max(d);
            out.push(ix);
            if self.eat_punct("]") {
                return Ok((out, depth));
            }
            if !self.eat_punct(",") {
                return Err(self.expected("`,` or `]` in the index list"));
            }
        }
    }

    /// `e`, `~e`, `gallop(e)`, `~gallop(e)` or `gallop(~e)`.
    fn index(&mut self) -> Result<(AccessIndex, usize)> {
        let mut permissive = self.eat_punct("~");
        let protocol = match self.peek() {
            Tok::Ident(w) if matches!(self.peek_at(1), Tok::Punct("(")) => Protocol::from_name(w),
            _ => None,
        };
        if protocol.is_none() {
            let (expr, d) = self.expr()?;
            return Ok((
                AccessIndex {
                    expr,
                    permissive,
                    protocol,
                },
                d,
            ));
        }
        let pname = describe(self.peek());
        self.bump();
        self.bump();
        if self.is_punct("~") {
            if permissive {
                return Err(self.err_here("`~` given twice for one index"));
            }
            self.bump();
            permissive = true;
        }
        let (expr, d) = self.expr()?;
        self.expect_punct(")", &format!(" to close {pname}"))?;
        Ok((
            AccessIndex {
                expr,
                permissive,
                protocol,
            },
            d,
        ))
    }

    // --- expressions ---

    /// An expression and the depth of its tree.
    fn expr(&mut self) -> Result<(Expr, usize)> {
        self.binary(1)
    }

    fn binary_op(&self) -> Option<BinaryOp> {
        Some(match self.peek() {
            Tok::Punct(p) => match *p {
                "+" => BinaryOp::Add,
                "-" => BinaryOp::Sub,
                "*" => BinaryOp::Mul,
                "/" => BinaryOp::Div,
                "%" => BinaryOp::Rem,
                "==" => BinaryOp::Eq,
                "!=" => BinaryOp::Ne,
                "<" => BinaryOp::Lt,
                "<=" => BinaryOp::Le,
                ">" => BinaryOp::Gt,
                ">=" => BinaryOp::Ge,
                "&&" => BinaryOp::AndAnd,
                "||" => BinaryOp::OrOr,
                "&" => BinaryOp::BitAnd,
                "|" => BinaryOp::BitOr,
                "<<" => BinaryOp::Shl,
                ">>" => BinaryOp::Shr,
                _ => return None,
            },
            Tok::Ident(w) if w == "xor" => BinaryOp::Xor,
            _ => return None,
        })
    }

    /// Precedence climbing: every operator is left-associative, so the right operand only takes
    /// operators that bind strictly tighter.
    fn binary(&mut self, min_prec: u8) -> Result<(Expr, usize)> {
        let (mut lhs, mut depth) = self.unary()?;
        while let Some(op) = self.binary_op() {
            let prec = op.precedence();
            if prec < min_prec {
                break;
            }
            self.bump();
            // An operator at the end of a line continues the expression on the next one.
            self.skip_newlines();
            let (rhs, rd) = self.binary(prec + 1)?;
            depth = depth.max(rd) + 1;
            if depth > MAX_EXPR_DEPTH {
                return Err(Error::syntax(
                    lhs.span,
                    format!("expression nested deeper than {MAX_EXPR_DEPTH} levels"),
                ));
            }
            let span = lhs.span;
            lhs = Expr::new(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span);
        }
        Ok((lhs, depth))
    }

    fn unary(&mut self) -> Result<(Expr, usize)> {
        self.enter()?;
        let r = self.unary_inner();
        self.leave();
        r
    }

    fn unary_inner(&mut self) -> Result<(Expr, usize)> {
        let span = self.span();
        let op = match self.peek() {
            Tok::Punct("-") => UnaryOp::Neg,
            Tok::Punct("!") => UnaryOp::Not,
            _ => return self.primary(),
        };
        self.bump();
        if op == UnaryOp::Neg {
            // `-` directly on a numeric literal is part of the literal, so that `-1` is the value
            // -1 and `-9223372036854775808` is representable.
            let folded = match self.peek() {
                Tok::Int(v) => {
                    let v = *v;
                    if v > i64::MAX as u64 + 1 {
                        return Err(self.err_here(format!(
                            "integer literal `-{v}` is too small for a 64-bit integer"
                        )));
                    }
                    Some(Scalar::I64((v as i64).wrapping_neg()))
                }
                Tok::Float(v) => Some(Scalar::F64(-*v)),
                Tok::Ident(w) if w == "Inf" => Some(Scalar::F64(f64::NEG_INFINITY)),
                Tok::Ident(w) if w == "NaN" => Some(Scalar::F64(-f64::NAN)),
                _ => None,
            };
            if let Some(v) = folded {
                self.bump();
                return Ok((Expr::new(ExprKind::Literal(v), span), 1));
            }
        }
        let (e, d) = self.unary()?;
        Ok((Expr::new(ExprKind::Unary(op, Box::new(e)), span), d + 1))
    }

    fn primary(&mut self) -> Result<(Expr, usize)> {
        let span = self.span();
        let lit = |v: Scalar| Ok((Expr::new(ExprKind::Literal(v), span), 1));
        match self.peek().clone() {
            Tok::Int(v) => {
                let Ok(v) = i64::try_from(v) else {
                    return Err(self.err_here(format!(
                        "integer literal `{v}` is too large for a 64-bit integer"
                    )));
                };
                self.bump();
                lit(Scalar::I64(v))
            }
            Tok::Float(v) => {
                self.bump();
                lit(Scalar::F64(v))
            }
            Tok::Hex(v) => {
                self.bump();
                lit(Scalar::U8(v))
            }
            Tok::Punct("(") => {
                self.bump();
                let (e, d) = self.expr()?;
                self.expect_punct(")", &format!(" to close `(` at {span}"))?;
                Ok((e, d))
            }
            Tok::Ident(w) => match w.as_str() {
                "true" | "false" => {
                    self.bump();
                    lit(Scalar::Bool(w == "true"))
                }
                "Inf" => {
                    self.bump();
                    lit(Scalar::F64(f64::INFINITY))
                }
                "NaN" => {
                    self.bump();
                    lit(Scalar::F64(f64::NAN))
                }
                "missing" => {
                    self.bump();
                    Ok((Expr::new(ExprKind::Missing, span), 1))
                }
                _ if is_keyword(&w) || w == "_" => Err(self.expected("an expression")),
                _ => {
                    self.bump();
                    if self.is_punct("[") {
                        let (indices, d) = self.indices()?;
                        let access = Access {
                            tensor: w,
                            indices,
                            span,
                        };
                        Ok((Expr::new(ExprKind::Access(access), span), d + 1))
                    } else if self.is_punct("(") {
                        if Protocol::from_name(&w).is_some() {
                            return Err(Error::syntax(
                                span,
                                format!(
                                    "`{w}(...)` is an access protocol and can only be used as an index, as in `A[{w}(i)]`"
                                ),
                            ));
                        }
                        let (args, d) = self.args()?;
                        Ok((Expr::new(ExprKind::Call(w, args), span), d + 1))
                    } else {
                        Ok((Expr::new(ExprKind::Name(w), span), 1))
                    }
                }
            },
            _ => Err(self.expected("an expression")),
        }
    }

    /// `(e, ...)` of a call.
    fn args(&mut self) -> Result<(Vec<Expr>, usize)> {
        let open = self.expect_punct("(", "")?;
        let mut out = Vec::new();
        let mut depth = 0;
        if self.eat_punct(")") {
            return Ok((out, depth));
        }
        loop {
            let (e, d) = self.expr()?;
            depth = depth.max(d);
            out.push(e);
            if self.eat_punct(")") {
                return Ok((out, depth));
            }
            if !self.eat_punct(",") {
                return Err(
                    self.expected(&format!("`,` or `)` in the argument list opened at {open}"))
                );
            }
        }
    }
}
