//! The text front end: a hand-written lexer and a recursive-descent parser with precedence
//! climbing for binary operators.
//!
//! The parser never panics: every malformed input becomes an [`Error::Syntax`] naming the
//! line:column of the offending token, what was expected and what was found. Nesting is bounded
//! (see [`MAX_NESTING`] and [`MAX_EXPR_DEPTH`]) so that hostile input cannot overflow the stack,
//! either here or later when the AST is dropped, compared or printed.
//!
//! ```text
//! program  := (reducer | stmt)* (separated by newlines or `;`; `#` starts a comment)
//! reducer  := `reducer` name `(` name `,` name `)` `=` expr property*     (top level only)
//! property := `identity` literal | `annihilator` literal | `commutative` | `associative`
//!           | `idempotent` | `derivative` `(` expr `)`
//! stmt     := name `.=` expr
//!           | lhs assignop expr              lhs := name | tensor `[` index,* `]`
//! tensor   := name | `swizzle(` tensor (`,` int)* `)`
//!           | `for` name `=` extent (`,` name `=` extent)* stmt* `end`
//!           | `if` expr stmt* (`else` stmt*)? `end`
//!           | `let` name `=` expr (`,` name `=` expr)* stmt* `end`
//!           | `begin` stmt* `end` | `@freeze(` name `)` | `@thaw(` name `)`
//! extent   := `_` | expr `:` expr
//! assignop := `=` | `+=` | `-=` | `*=` | `&=` | `|=` | `<<` name (`(` literal `)`)? `>>=`
//! index    := `~`? windowed | `~`? protocol `(` `~`? windowed `)`
//! windowed := expr | `(` expr `:` expr `)` `(` expr `)`
//! expr     := binary operators by `BinaryOp::precedence`, all left-associative, over
//!             (`-` | `!`)* (literal | `missing` | name | tensor `[` index,* `]`
//!             | name `(` expr,* `)` | `(` expr `)`)
//! ```
//!
//! Newlines inside brackets and after a binary operator, `,`, `:` or an assignment operator do
//! not end a statement.

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

/// The derivatives of fields that take components after the call, with their count.
pub const FIELD_COMPONENTS: [(&str, usize); 2] = [("grad", 1), ("hess", 2)];

/// The components written after a call, `F(x, y)[k]`, `grad(F, x, y)[c]`: the call's last
/// argument is `Call(COMPONENTS, [k])`, so the position and the components stay apart (a
/// vector field's Jacobian `grad(V, x, y)[k, c]` has as many arguments as a 3-d gradient).
/// Not a name a program can write; the printer writes it back as `[k]` after the call.
pub const COMPONENTS: &str = "[]";

/// `args` split into the arguments before the components and the components, if written.
pub fn split_components(args: &[Expr]) -> (&[Expr], Option<&Expr>) {
    match args.split_last() {
        Some((last, rest)) if matches!(&last.kind, ExprKind::Call(n, _) if n == COMPONENTS) => {
            (rest, Some(last))
        }
        _ => (args, None),
    }
}

/// The components argument (see [`COMPONENTS`]) of `indices`, written at `at`.
fn components(indices: Vec<AccessIndex>, at: Span) -> Expr {
    let ixs = indices.into_iter().map(|ix| ix.expr).collect();
    Expr::new(ExprKind::Call(COMPONENTS.into(), ixs), at)
}

/// Parse a whole program.
pub fn parse_program(text: &str) -> Result<Program> {
    let mut p = Parser::new(text)?;
    let body = p.stmts()?;
    match p.peek() {
        Tok::Eof => Ok(Program {
            reducers: std::mem::take(&mut p.reducers),
            body,
        }),
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
    "⊛", "∇", "⊗",
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
            // A `.` directly followed by a letter, digit or `_` continues the name: the
            // derived loop names of schedules (`i.0`, `i.1` after a split, `i.j` after a
            // merge) must parse back. `T .= v` and `T.= v` are unaffected (`.` then `=`).
            let word = |c: Option<&char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_');
            while i < chars.len()
                && (word(chars.get(i)) || (chars[i] == '.' && word(chars.get(i + 1))))
            {
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
            // `i` counts characters (`⊛` is one character of three bytes).
            i += p.chars().count();
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
    /// `reducer` definitions met so far (they sit between the statements of the top level).
    reducers: Vec<ReducerDef>,
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
            reducers: Vec::new(),
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
            if self.at_reducer_def() {
                if self.nesting > 0 {
                    return Err(self.err_here(
                        "a `reducer` definition must be at the top level of the program",
                    ));
                }
                let def = self.reducer_def()?;
                self.reducers.push(def);
            } else if self.at_field_decl() {
                // `field F = e` binds `F` for the rest of the block: it is the `let F = e`
                // around the statements that follow (`transforms::fields` expands it).
                let span = self.bump().span;
                let (name, _) = self.name("a field name after `field`")?;
                // `field V[3] = img ⊛ h`: a vector field of 3 components along the image's
                // last axis, `conv(img, h, 3)`.
                let comps = if self.eat_punct("[") {
                    let at = self.span();
                    let n = match self.peek() {
                        Tok::Int(n) => *n,
                        _ => {
                            return Err(
                                self.expected("the number of components, `field V[3] = img ⊛ h`")
                            );
                        }
                    };
                    self.bump();
                    self.expect_punct("]", " after the number of components")?;
                    Some((n, at))
                } else {
                    None
                };
                self.expect_punct("=", &format!(" after `field {name}`"))?;
                let mut value = self.field_value()?;
                if let Some((n, at)) = comps {
                    match &mut value.kind {
                        ExprKind::Call(f, args) if f == "conv" && args.len() == 2 => {
                            let n = i64::try_from(n).unwrap_or(i64::MAX);
                            args.push(Expr::new(ExprKind::Literal(Scalar::I64(n)), at));
                        }
                        _ => {
                            return Err(Error::syntax(
                                at,
                                "a vector field's components go with a convolution, `field V[3] = img ⊛ h`; sums, scalings and products take their shape from their fields",
                            ));
                        }
                    }
                }
                match self.peek() {
                    Tok::Newline | Tok::Eof => {}
                    Tok::Punct(";") => {}
                    _ => return Err(self.expected("end of line or `;` after the field")),
                }
                let body = self.stmts()?;
                out.push(Stmt::new(StmtKind::Let { name, value, body }, span));
                return Ok(out);
            } else {
                out.push(self.stmt()?);
            }
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
                    let (extent, parallel) = self.loop_extent()?;
                    headers.push((index, extent, parallel, ispan));
                    if !self.eat_punct(",") {
                        break;
                    }
                    self.skip_newlines();
                }
                let mut body = self.body_until_end(&opener)?;
                // `for i = _, j = _` is `i` outer, `j` inner; the outermost loop keeps the span
                // of `for`, inner ones the span of their index.
                for (k, (index, extent, parallel, ispan)) in headers.into_iter().enumerate().rev() {
                    let s = if k == 0 { span } else { ispan };
                    body = vec![Stmt::new(
                        StmtKind::Loop {
                            index,
                            extent,
                            body,
                            parallel,
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

    /// `reducer name(` starts a definition; `reducer` alone is an ordinary name.
    /// The value of `field F = ...`: `img ⊛ h` and `img (*) h` are `conv(img, h)`; anything
    /// else is an expression (`conv(img, h)`, `2 * F - G`).
    fn field_value(&mut self) -> Result<Expr> {
        let conv = matches!(self.peek(), Tok::Ident(_))
            && (matches!(self.peek_at(1), Tok::Punct("⊛"))
                || (matches!(self.peek_at(1), Tok::Punct("("))
                    && matches!(self.peek_at(2), Tok::Punct("*"))
                    && matches!(self.peek_at(3), Tok::Punct(")"))));
        if !conv {
            return Ok(self.expr()?.0);
        }
        let span = self.span();
        let (img, _) = self.name("an image name")?;
        let ops = if self.eat_punct("⊛") { 0 } else { 3 };
        for _ in 0..ops {
            self.bump();
        }
        let kspan = self.span();
        let (kernel, _) = self.name("a kernel name after the convolution")?;
        Ok(Expr::new(
            ExprKind::Call(
                "conv".into(),
                vec![
                    Expr::new(ExprKind::Name(img), span),
                    Expr::new(ExprKind::Name(kernel), kspan),
                ],
            ),
            span,
        ))
    }

    /// `field NAME =`: a statement cannot otherwise start with two names.
    /// `field NAME[n] =` too (a vector field).
    fn at_field_decl(&self) -> bool {
        self.is_word("field")
            && matches!(self.peek_at(1), Tok::Ident(_))
            && (matches!(self.peek_at(2), Tok::Punct("="))
                || (matches!(self.peek_at(2), Tok::Punct("["))
                    && matches!(self.peek_at(3), Tok::Int(_))
                    && matches!(self.peek_at(4), Tok::Punct("]"))
                    && matches!(self.peek_at(5), Tok::Punct("="))))
    }

    fn at_reducer_def(&self) -> bool {
        self.is_word("reducer")
            && matches!(self.peek_at(1), Tok::Ident(_))
            && matches!(self.peek_at(2), Tok::Punct("("))
    }

    fn reducer_def(&mut self) -> Result<ReducerDef> {
        let span = self.bump().span;
        let (name, _) = self.name("a reducer name after `reducer`")?;
        self.expect_punct("(", &format!(" after `reducer {name}`"))?;
        let (old, _) = self.name("the name of the old value")?;
        self.expect_punct(",", " between the two parameters of a reducer")?;
        let (new, _) = self.name("the name of the new value")?;
        self.expect_punct(")", &format!(" to close the parameters of `{name}`"))?;
        self.expect_punct("=", &format!(" before the body of `{name}`"))?;
        self.skip_newlines();
        let (body, _) = self.expr()?;
        let mut def = ReducerDef::new(&name, body);
        def.params = [old, new];
        def.span = span;
        let mut seen: Vec<String> = Vec::new();
        while let Tok::Ident(w) = self.peek().clone() {
            let wspan = self.span();
            if seen.contains(&w) {
                return Err(self.err_here(format!("`{w}` is given twice for `{name}`")));
            }
            match w.as_str() {
                "identity" | "annihilator" => {
                    self.bump();
                    let vspan = self.span();
                    let (v, _) = self.unary()?;
                    let ExprKind::Literal(v) = v.kind else {
                        return Err(Error::syntax(
                            vspan,
                            format!("expected a literal value after `{w}`"),
                        ));
                    };
                    if w == "identity" {
                        def.identity = Some(v);
                    } else {
                        def.annihilator = Some(v);
                    }
                }
                "commutative" => {
                    self.bump();
                    def.commutative = true;
                }
                "associative" => {
                    self.bump();
                    def.associative = true;
                }
                "idempotent" => {
                    self.bump();
                    def.idempotent = true;
                }
                "derivative" => {
                    self.bump();
                    self.expect_punct("(", " after `derivative`")?;
                    let (d, _) = self.expr()?;
                    self.expect_punct(")", " to close `derivative(...)`")?;
                    def.derivative = Some(d);
                }
                _ => {
                    return Err(Error::syntax(
                        wspan,
                        format!(
                            "unknown reducer property `{w}` (expected `identity`, `annihilator`, `commutative`, `associative`, `idempotent` or `derivative(...)`)"
                        ),
                    ));
                }
            }
            seen.push(w);
        }
        Ok(def)
    }

    /// Whether a `swizzle(...)` view starts here (`swizzle` alone is an ordinary name).
    fn at_swizzle(&self) -> bool {
        self.is_word("swizzle") && matches!(self.peek_at(1), Tok::Punct("("))
    }

    /// `swizzle(T, p...)`, possibly nested: the tensor and the composed permutation.
    fn swizzle_head(&mut self) -> Result<(String, Vec<usize>)> {
        self.enter()?;
        let r = self.swizzle_head_inner();
        self.leave();
        r
    }

    fn swizzle_head_inner(&mut self) -> Result<(String, Vec<usize>)> {
        let span = self.bump().span;
        self.bump();
        let (tensor, inner) = if self.at_swizzle() {
            let (t, p) = self.swizzle_head()?;
            (t, Some(p))
        } else {
            (self.name("a tensor name in `swizzle(`")?.0, None)
        };
        let mut perm = Vec::new();
        while self.eat_punct(",") {
            match self.peek() {
                Tok::Int(v) => {
                    perm.push(usize::try_from(*v).unwrap_or(usize::MAX));
                    self.bump();
                }
                _ => return Err(self.expected("a dimension number in `swizzle(...)`")),
            }
        }
        self.expect_punct(")", &format!(" to close `swizzle(` at {span}"))?;
        if let Some(msg) = swizzle_problem(&perm) {
            return Err(Error::syntax(span, msg));
        }
        match inner {
            None => Ok((tensor, perm)),
            Some(inner) if inner.len() == perm.len() => {
                Ok((tensor, super::build::compose_swizzles(&inner, &perm)))
            }
            Some(inner) => Err(Error::syntax(
                span,
                format!(
                    "this swizzle has {} dimensions but the view it swizzles has {}",
                    perm.len(),
                    inner.len()
                ),
            )),
        }
    }

    /// `swizzle(T, p...)[idx...]`; the index count must match the permutation.
    fn swizzled_access(&mut self) -> Result<(Access, usize)> {
        let span = self.span();
        let (tensor, perm) = self.swizzle_head()?;
        if !self.is_punct("[") {
            return Err(self.expected("`[` after `swizzle(...)`"));
        }
        let (indices, d) = self.indices()?;
        if indices.len() != perm.len() {
            return Err(Error::syntax(
                span,
                format!(
                    "`swizzle` of {} dimensions accessed with {} indices",
                    perm.len(),
                    indices.len()
                ),
            ));
        }
        let access = Access {
            tensor,
            indices,
            swizzle: Some(perm),
            span,
        };
        Ok((access, d))
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

    /// A loop's extent, `parallel(extent)` (Finch's spelling) marking the loop parallel,
    /// `parallel(extent, atomics)` / `parallel(extent, copies)` with the schedule's choice of
    /// folds, `vectorize(extent)` marking it for SIMD lanes.
    fn loop_extent(&mut self) -> Result<(Extent, LoopMode)> {
        for word in ["parallel", "vectorize"] {
            if !(self.is_word(word) && matches!(self.peek_at(1), Tok::Punct("("))) {
                continue;
            }
            self.bump();
            self.bump();
            self.skip_newlines();
            let extent = self.extent()?;
            self.skip_newlines();
            let mut mode = if word == "parallel" {
                LoopMode::Parallel(Folds::Auto)
            } else {
                LoopMode::Vector
            };
            if word == "parallel" && self.eat_punct(",") {
                self.skip_newlines();
                mode = if self.is_word("atomics") {
                    LoopMode::Parallel(Folds::Atomics)
                } else if self.is_word("copies") {
                    LoopMode::Parallel(Folds::Copies)
                } else {
                    return Err(self.expected("`atomics` or `copies` after `parallel(extent,`"));
                };
                self.bump();
                self.skip_newlines();
            }
            self.expect_punct(")", &format!(" to close `{word}(`"))?;
            return Ok((extent, mode));
        }
        Ok((self.extent()?, LoopMode::Serial))
    }

    fn extent(&mut self) -> Result<Extent> {
        if self.is_word("_") {
            self.bump();
            return Ok(Extent::Auto);
        }
        let (lo, _) = self.expr()?;
        self.expect_punct(":", " in the loop range `lo:hi` (or `_` to infer it)")?;
        self.skip_newlines();
        let (hi, _) = self.expr()?;
        Ok(Extent::Range(lo, hi))
    }

    /// `T .= init`, `T[idx...] op rhs` or `s op rhs`.
    fn assignment(&mut self) -> Result<Stmt> {
        if self.at_swizzle() {
            let span = self.span();
            let (lhs, _) = self.swizzled_access()?;
            let op = self.assign_op()?;
            self.skip_newlines();
            let (rhs, _) = self.expr()?;
            return Ok(Stmt::new(StmtKind::Assign { lhs, op, rhs }, span));
        }
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
            swizzle: None,
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

    /// `e`, `~e`, `gallop(e)`, `~gallop(e)` or `gallop(~e)`, where `e` may be a window
    /// `(lo:hi)(e)`.
    fn index(&mut self) -> Result<(AccessIndex, usize)> {
        let mut permissive = self.eat_punct("~");
        let protocol = match self.peek() {
            Tok::Ident(w) if matches!(self.peek_at(1), Tok::Punct("(")) => Protocol::from_name(w),
            _ => None,
        };
        if protocol.is_none() {
            let (window, expr, d) = self.windowed()?;
            return Ok((
                AccessIndex {
                    expr,
                    permissive,
                    protocol,
                    window,
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
        let (window, expr, d) = self.windowed()?;
        self.expect_punct(")", &format!(" to close {pname}"))?;
        Ok((
            AccessIndex {
                expr,
                permissive,
                protocol,
                window,
            },
            d,
        ))
    }

    /// `e` or `(lo:hi)(e)`. A window starts like a parenthesised expression: after `(` and an
    /// expression, a `:` makes it a window; otherwise the parenthesised expression is the first
    /// operand of the index expression (parsed once: backtracking would be exponential in the
    /// nesting of accesses).
    #[allow(clippy::type_complexity)]
    fn windowed(&mut self) -> Result<(Option<(Expr, Expr)>, Expr, usize)> {
        if !self.is_punct("(") {
            let (e, d) = self.expr()?;
            return Ok((None, e, d));
        }
        let open = self.bump().span;
        self.enter()?;
        let r = self.window_rest(open);
        self.leave();
        r
    }

    /// After the `(` that starts an index.
    #[allow(clippy::type_complexity)]
    fn window_rest(&mut self, open: Span) -> Result<(Option<(Expr, Expr)>, Expr, usize)> {
        let (lo, d1) = self.expr()?;
        if !self.eat_punct(":") {
            self.expect_punct(")", &format!(" to close `(` at {open}"))?;
            let (e, d) = self.binary_rest(lo, d1, 1)?;
            return Ok((None, e, d));
        }
        let (hi, d2) = self.expr()?;
        self.expect_punct(
            ")",
            &format!(" to close the window `(lo:hi)` opened at {open}"),
        )?;
        self.expect_punct("(", " after the window `(lo:hi)`, as in `(lo:hi)(i)`")?;
        let (e, d3) = self.expr()?;
        self.expect_punct(")", " to close the index of the window")?;
        Ok((Some((lo, hi)), e, d1.max(d2).max(d3) + 1))
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
        let (lhs, depth) = self.unary()?;
        self.binary_rest(lhs, depth, min_prec)
    }

    /// The operators after a first operand `lhs` already parsed.
    fn binary_rest(
        &mut self,
        mut lhs: Expr,
        mut depth: usize,
        min_prec: u8,
    ) -> Result<(Expr, usize)> {
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
                "swizzle" if self.at_swizzle() => {
                    let (access, d) = self.swizzled_access()?;
                    Ok((Expr::new(ExprKind::Access(access), span), d + 1))
                }
                _ => {
                    self.bump();
                    if self.is_punct("[") {
                        let (indices, d) = self.indices()?;
                        let access = Access {
                            tensor: w,
                            indices,
                            swizzle: None,
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
                        let (mut args, mut d) = self.args()?;
                        let derivative = FIELD_COMPONENTS.iter().any(|(f, _)| *f == w);
                        if derivative && args.len() == 1 && self.is_punct("(") {
                            // `grad(F)(x, y)[c]`: the derivative field, then its probe.
                            let (coords, d2) = self.args()?;
                            d = d.max(d2);
                            args.extend(coords);
                        }
                        if self.is_punct("[") {
                            // `grad(F, x, y)[c]`, `hess(F, x, y)[a, b]`, a vector field's
                            // `V(x, y)[k]`: the components, kept apart in one argument.
                            let at = self.span();
                            let (indices, _) = self.indices()?;
                            args.push(components(indices, at));
                        }
                        Ok((Expr::new(ExprKind::Call(w, args), span), d + 1))
                    } else {
                        Ok((Expr::new(ExprKind::Name(w), span), 1))
                    }
                }
            },
            Tok::Punct("∇") => self.nabla(),
            _ => Err(self.expected("an expression")),
        }
    }

    /// `∇F(x, ...)[c]` and `∇⊗∇F(x, ...)[a, b]`, Diderot's spellings of
    /// `grad(F, x, ...)[c]` and `hess(F, x, ...)[a, b]` (the same tree, so they print in
    /// those forms and parse back to it).
    fn nabla(&mut self) -> Result<(Expr, usize)> {
        let span = self.span();
        self.bump();
        let (name, comps) = if self.eat_punct("⊗") {
            if !self.eat_punct("∇") {
                return Err(self.expected("`∇` after `∇⊗` (the Hessian is `∇⊗∇F(x, ...)[a, b]`)"));
            }
            ("hess", 2)
        } else {
            ("grad", 1)
        };
        let field = match self.peek().clone() {
            Tok::Ident(f) if !is_keyword(&f) => {
                let at = self.span();
                self.bump();
                Expr::new(ExprKind::Name(f), at)
            }
            _ => return Err(self.expected("a field's name after `∇`")),
        };
        let wanted = if comps == 1 { "[c]" } else { "[a, b]" };
        if !self.is_punct("(") {
            return Err(self.expected(&format!(
                "`(` and the position: a derivative of a field is probed, as in `{}{}(x, y){wanted}`",
                if comps == 1 { "∇" } else { "∇⊗∇" },
                match &field.kind {
                    ExprKind::Name(f) => f.as_str(),
                    _ => "F",
                }
            )));
        }
        let (coords, d) = self.args()?;
        if !self.is_punct("[") {
            return Err(self.expected(&format!(
                "the component{} of the {}: `{wanted}`",
                if comps == 1 { "" } else { "s" },
                if comps == 1 { "gradient" } else { "Hessian" }
            )));
        }
        let at = self.span();
        let (indices, _) = self.indices()?;
        // One more index for a vector field's component: `∇V(x, y)[k, c]` is ∂Vₖ/∂x_c.
        if indices.len() != comps && indices.len() != comps + 1 {
            return Err(Error::syntax(
                at,
                format!(
                    "the {} takes {comps} component index{} (one more, first, for a vector field's component): `{wanted}`",
                    if comps == 1 { "gradient" } else { "Hessian" },
                    if comps == 1 { "" } else { "es" }
                ),
            ));
        }
        let mut args = vec![field];
        args.extend(coords);
        args.push(components(indices, at));
        Ok((Expr::new(ExprKind::Call(name.into(), args), span), d + 1))
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

/// Why `perm` is not a permutation of `0..perm.len()`, if it is not.
pub fn swizzle_problem(perm: &[usize]) -> Option<String> {
    let mut seen = vec![false; perm.len()];
    for &p in perm {
        match seen.get_mut(p) {
            Some(s) if !*s => *s = true,
            _ => {
                let list: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
                return Some(format!(
                    "swizzle dimensions ({}) are not a permutation of 0..{}",
                    list.join(", "),
                    perm.len()
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::build::*;

    fn err(text: &str) -> String {
        match parse_program(text) {
            Ok(p) => panic!("expected an error for {text:?}, got {p:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn expr(text: &str) -> Expr {
        parse_expr(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn prog(text: &str) -> Program {
        parse_program(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn spmv() -> Program {
        program([
            declare("y", lit(0)),
            for_(
                "i",
                auto(),
                [for_(
                    "j",
                    auto(),
                    [assign(
                        access("y", [idx("i")]),
                        Reducer::Add,
                        mul(access("A", [idx("i"), idx("j")]), access("x", [idx("j")])),
                    )],
                )],
            ),
        ])
    }

    #[test]
    fn spmv_parses() {
        let p = prog("y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * x[j]\nend\n");
        assert_eq!(p, spmv());
        // Spans point at the first token of each node.
        assert_eq!(p.body[0].span, Span::new(1, 1));
        let StmtKind::Loop { body, .. } = &p.body[1].kind else {
            panic!()
        };
        assert_eq!((p.body[1].span.line, p.body[1].span.col), (2, 1));
        assert_eq!((body[0].span.line, body[0].span.col), (2, 12));
        let StmtKind::Loop { body, .. } = &body[0].kind else {
            panic!()
        };
        let StmtKind::Assign { lhs, rhs, .. } = &body[0].kind else {
            panic!()
        };
        assert_eq!((lhs.span.line, lhs.span.col), (3, 3));
        assert_eq!((rhs.span.line, rhs.span.col), (3, 11));
        let ExprKind::Binary(_, _, x) = &rhs.kind else {
            panic!()
        };
        assert_eq!((x.span.line, x.span.col), (3, 21));
    }

    #[test]
    fn parallel_loops_parse_and_print() {
        let p = prog("for i = parallel(_), j = _\n  y[i] += A[i, j] * x[j]\nend\n");
        let StmtKind::Loop { parallel, body, .. } = &p.body[0].kind else {
            panic!()
        };
        assert_eq!(*parallel, LoopMode::Parallel(Folds::Auto));
        assert!(matches!(
            &body[0].kind,
            StmtKind::Loop {
                parallel: crate::notation::ast::LoopMode::Serial,
                ..
            }
        ));
        assert!(p.to_string().contains("for i = parallel(_), j = _"));
        assert_eq!(prog(&p.to_string()), p);
        let q = prog("for i = parallel(0:n - 1)\n  y[i] = x[i]\nend");
        assert!(q.to_string().starts_with("for i = parallel(0:n - 1)"));
        assert_eq!(prog(&q.to_string()), q);
        let e = parse_program("for i = parallel(_\n  y[i] = 1\nend").unwrap_err();
        assert!(e.to_string().contains("`parallel(`"), "{e}");
        // The schedule's marks round-trip: fold choices and vectorised loops.
        for text in [
            "for i = parallel(_, atomics)\n  y[i] = x[i]\nend",
            "for i = parallel(0:n - 1, copies), j = vectorize(_)\n  y[i] += A[i, j]\nend",
        ] {
            let q = prog(text);
            assert!(
                q.to_string().starts_with(text.split('\n').next().unwrap()),
                "{q}"
            );
            assert_eq!(prog(&q.to_string()), q);
        }
        let e = parse_program("for i = parallel(_, fast)\n  y[i] = 1\nend").unwrap_err();
        assert!(e.to_string().contains("`atomics` or `copies`"), "{e}");
        let e = parse_program("for i = vectorize(_, atomics)\n  y[i] = 1\nend").unwrap_err();
        assert!(e.to_string().contains("`vectorize(`"), "{e}");
    }

    #[test]
    fn separators_and_comments() {
        let one_line = prog("y .= 0; for i = _, j = _; y[i] += A[i, j] * x[j]; end");
        assert_eq!(one_line, spmv());
        let commented = prog(
            "# SpMV\n\n y .= 0 # output\nfor i = _,   # rows\n    j = _\n\n  # body\n  y[i] += A[i,\n     j] *\n     x[j];;\nend # done\n\n",
        );
        assert_eq!(commented, spmv());
        assert_eq!(prog(""), program([]));
        assert_eq!(prog("\n; # nothing\n;;"), program([]));
        assert_eq!(
            prog("for i = _ s[] += 1 end"),
            prog("for i = _\n s[] += 1\nend")
        );
    }

    #[test]
    fn statements() {
        assert_eq!(prog("s .= 0.0"), program([declare("s", lit(0.0))]));
        assert_eq!(
            prog("for i = 0:n - 1\nend"),
            program([for_("i", range(lit(0), sub("n", lit(1))), [])])
        );
        assert_eq!(
            prog("if i <= j; s[] += 1; else; s[] -= 1; end"),
            program([if_else(
                le("i", "j"),
                [assign(access("s", []), Reducer::Add, lit(1))],
                [assign(access("s", []), Reducer::Sub, lit(1))]
            )])
        );
        assert_eq!(
            prog("let a = 1, b = a + 1\n  s = b\nend"),
            program([let_(
                "a",
                lit(1),
                [let_(
                    "b",
                    add("a", lit(1)),
                    [overwrite(access("s", []), "b")]
                )]
            )])
        );
        assert_eq!(prog("begin\nend"), program([block([])]));
        assert_eq!(
            prog("@freeze(A)\n@thaw(A)"),
            program([freeze("A"), thaw("A")])
        );
        // A bare name on the left is a 0-d access.
        assert_eq!(prog("s += 1"), prog("s[] += 1"));
    }

    #[test]
    fn all_reducers() {
        let cases: Vec<(&str, AssignOp)> = vec![
            ("=", AssignOp::Overwrite),
            ("+=", Reducer::Add.into()),
            ("-=", Reducer::Sub.into()),
            ("*=", Reducer::Mul.into()),
            ("&=", Reducer::And.into()),
            ("|=", Reducer::Or.into()),
            ("<<and>>=", Reducer::And.into()),
            ("<<or>>=", Reducer::Or.into()),
            ("<<min>>=", Reducer::Min.into()),
            ("<<max>>=", Reducer::Max.into()),
            ("<<choose(-1)>>=", Reducer::Choose(Scalar::I64(-1)).into()),
            ("<<choose(0.5)>>=", Reducer::Choose(Scalar::F64(0.5)).into()),
            (
                "<<choose(false)>>=",
                Reducer::Choose(Scalar::Bool(false)).into(),
            ),
            (
                "<<choose(-Inf)>>=",
                Reducer::Choose(Scalar::F64(f64::NEG_INFINITY)).into(),
            ),
            (
                "<< choose ( 0x00 ) >>=",
                Reducer::Choose(Scalar::U8(0)).into(),
            ),
            ("<<lcm>>=", Reducer::Named("lcm".into()).into()),
        ];
        for (text, op) in cases {
            let p = prog(&format!("P[k] {text} E[k]"));
            assert_eq!(
                p,
                program([assign(access("P", [idx("k")]), op, access("E", [idx("k")]))]),
                "{text}"
            );
        }
    }

    #[test]
    fn protocols_and_tilde() {
        let p =
            prog("y[~i] = A[gallop(i), ~walk(j), follow(~k), extrude(k + 1), ~(i - 1), gallop]");
        let a = access(
            "A",
            [
                idx("i").with_protocol(Protocol::Gallop),
                idx("j").with_protocol(Protocol::Walk).with_tilde(),
                idx("k").with_protocol(Protocol::Follow).with_tilde(),
                idx(add("k", lit(1))).with_protocol(Protocol::Extrude),
                idx(sub("i", lit(1))).with_tilde(),
                idx("gallop"),
            ],
        );
        assert_eq!(
            p,
            program([overwrite(access("y", [idx("i").with_tilde()]), a)])
        );
        assert!(err("y[i] = gallop(i)").contains("1:8:"));
        assert!(err("y[i] = A[~gallop(~i)]").contains("1:18:"));
    }

    #[test]
    fn reducer_definitions() {
        let p = prog(
            "reducer absmax(a, b) = max(abs(a), abs(b)) identity 0 commutative associative idempotent\nreducer sat(old, new) =\n  min(old + new, 255) annihilator 255 identity -0 commutative\ns .= 0\nfor i = _\n  s[] <<absmax>>= x[i]\nend",
        );
        let absmax = reducer(
            "absmax",
            call("max", [call("abs", [name("a")]), call("abs", [name("b")])]),
        )
        .identity(0)
        .commutative()
        .associative()
        .idempotent();
        let sat = reducer("sat", call("min", [add("old", "new"), lit(255)]))
            .params("old", "new")
            .identity(0)
            .annihilator(255)
            .commutative();
        let want = program([
            declare("s", lit(0)),
            for_(
                "i",
                auto(),
                [assign(
                    access("s", []),
                    user("absmax"),
                    access("x", [idx("i")]),
                )],
            ),
        ])
        .with_reducer(absmax)
        .with_reducer(sat);
        assert_eq!(p, want);
        assert_eq!(p.reducers[1].span, Span::new(2, 1));
        assert_eq!(parse_program(&p.to_string()), Ok(p));
        // Properties come in any order; `reducer` is still an ordinary name otherwise.
        assert_eq!(
            prog("reducer f(a, b) = a idempotent identity 1.5").reducers[0],
            reducer("f", "a").idempotent().identity(1.5)
        );
        // A declared derivative (of the result in one element) prints and parses back.
        let lse = prog(
            "reducer lse(r, x) = log(exp(r) + exp(x)) commutative associative derivative(exp(x - r))",
        );
        assert!(lse.reducers[0].derivative.is_some());
        assert_eq!(parse_program(&lse.to_string()), Ok(lse));
        assert_eq!(
            prog("reducer .= 0\nreducer[i] = 1").body,
            program([
                declare("reducer", lit(0)),
                overwrite(access("reducer", [idx("i")]), lit(1))
            ])
            .body
        );
        let cases = [
            (
                "reducer f(a, b) = a identity 0 identity 1",
                "1:32: syntax error: `identity` is given twice for `f`",
            ),
            (
                "reducer f(a, b) = a neutral 0",
                "1:21: syntax error: unknown reducer property `neutral` (expected `identity`, `annihilator`, `commutative`, `associative`, `idempotent` or `derivative(...)`)",
            ),
            (
                "reducer f(a, b) = a annihilator x",
                "1:33: syntax error: expected a literal value after `annihilator`",
            ),
            (
                "reducer f(a) = a",
                "1:12: syntax error: expected `,` between the two parameters of a reducer, found `)`",
            ),
            (
                "for i = _\n  reducer f(a, b) = a\nend",
                "2:3: syntax error: a `reducer` definition must be at the top level of the program",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "{text}");
        }
    }

    #[test]
    fn windows() {
        assert_eq!(
            prog("y[i] = A[(2:4)(i), ~(j - 1), (k)]"),
            program([overwrite(
                access("y", [idx("i")]),
                access(
                    "A",
                    [
                        idx("i").with_window(lit(2), lit(4)),
                        idx(sub("j", lit(1))).with_tilde(),
                        idx("k"),
                    ]
                )
            )])
        );
        assert_eq!(
            expr("A[gallop((j:j + 2)(i)), ~(0:size(A, 1) - 1)(k)]"),
            read(access(
                "A",
                [
                    idx("i")
                        .with_window("j", add("j", lit(2)))
                        .with_protocol(Protocol::Gallop),
                    idx("k")
                        .with_window(lit(0), sub(call("size", [name("A"), lit(1)]), lit(1)))
                        .with_tilde(),
                ]
            ))
        );
        assert_eq!(
            err("s += A[(0:2)]"),
            "1:13: syntax error: expected `(` after the window `(lo:hi)`, as in `(lo:hi)(i)`, found `]`"
        );
        assert_eq!(
            err("s += A[(0:2(i)]"),
            "1:12: syntax error: expected `)` to close the window `(lo:hi)` opened at 1:8, found `(`"
        );
    }

    #[test]
    fn swizzles() {
        let at = |t: &str, perm: &[usize]| access(t, [idx("i"), idx("j")]).swizzled(perm);
        assert_eq!(
            prog("swizzle(B, 1, 0)[i, j] = swizzle(A, 1, 0)[i, j]"),
            program([overwrite(at("B", &[1, 0]), at("A", &[1, 0]))])
        );
        // Nested swizzles compose: index k goes to dimension inner[outer[k]].
        assert_eq!(
            expr("swizzle(swizzle(C, 2, 0, 1), 1, 0, 2)[i, j, k]"),
            read(access("C", [idx("i"), idx("j"), idx("k")]).swizzled(&[0, 2, 1]))
        );
        assert_eq!(
            access("C", [idx("i"), idx("j"), idx("k")])
                .swizzled(&[2, 0, 1])
                .swizzled(&[1, 0, 2]),
            access("C", [idx("i"), idx("j"), idx("k")]).swizzled(&[0, 2, 1])
        );
        // `swizzle` alone is a name.
        assert_eq!(expr("swizzle + 1"), add("swizzle", lit(1)));
        let cases = [
            (
                "s += swizzle(A, 1, 1)[i, j]",
                "1:6: syntax error: swizzle dimensions (1, 1) are not a permutation of 0..2",
            ),
            (
                "s += swizzle(A, 0, 2)[i, j]",
                "1:6: syntax error: swizzle dimensions (0, 2) are not a permutation of 0..2",
            ),
            (
                "s += swizzle(A, 1, 0)[i]",
                "1:6: syntax error: `swizzle` of 2 dimensions accessed with 1 indices",
            ),
            (
                "s += swizzle(swizzle(A, 1, 0), 0)[i]",
                "1:6: syntax error: this swizzle has 1 dimensions but the view it swizzles has 2",
            ),
            (
                "s += swizzle(A, 1, 0) + 1",
                "1:23: syntax error: expected `[` after `swizzle(...)`, found `+`",
            ),
            (
                "s += swizzle(A, i)[i]",
                "1:17: syntax error: expected a dimension number in `swizzle(...)`, found name `i`",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(err(text), want, "{text}");
        }
    }

    #[test]
    fn literals() {
        assert_eq!(expr("Inf"), lit(f64::INFINITY));
        assert_eq!(expr("-Inf"), lit(f64::NEG_INFINITY));
        assert_eq!(expr("NaN"), lit(f64::NAN));
        assert_eq!(expr("0xff"), lit(0xffu8));
        assert_eq!(expr("0x1f"), lit(0x1fu8));
        assert_eq!(expr("0x0000ff"), lit(0xffu8));
        assert_eq!(expr("true"), lit(true));
        assert_eq!(expr("false"), lit(false));
        assert_eq!(expr("missing"), missing());
        assert_eq!(expr("1.5"), lit(1.5));
        assert_eq!(expr("1e-3"), lit(1e-3));
        assert_eq!(expr("2."), lit(2.0));
        assert_eq!(expr(".5"), lit(0.5));
        assert_eq!(expr("3E+2"), lit(300.0));
        assert_eq!(expr("-1"), lit(-1));
        assert_eq!(expr("-2.5"), lit(-2.5));
        assert_eq!(expr("- 1"), lit(-1));
        assert_eq!(expr("-(1)"), neg(lit(1)));
        assert_eq!(expr("--1"), neg(lit(-1)));
        assert_eq!(expr("-x"), neg("x"));
        assert_eq!(expr("-0x01"), neg(lit(1u8)));
        assert_eq!(expr("9223372036854775807"), lit(i64::MAX));
        assert_eq!(expr("-9223372036854775808"), lit(i64::MIN));
        assert!(parse_expr("9223372036854775808").is_err());
        assert!(parse_expr("-9223372036854775809").is_err());
        assert!(parse_expr("99999999999999999999999").is_err());
        assert!(parse_expr("0x100").unwrap_err().to_string().contains("u8"));
        assert!(parse_expr("0x").is_err());
        assert!(parse_expr("1.2.3").is_err());
        assert!(parse_expr("12abc").is_err());
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(expr("a + b * c"), add("a", mul("b", "c")));
        assert_eq!(expr("a - b - c"), sub(sub("a", "b"), "c"));
        assert_eq!(expr("a - (b - c)"), sub("a", sub("b", "c")));
        assert_eq!(expr("a || b && c == d"), or("a", and("b", eq("c", "d"))));
        assert_eq!(
            expr("a | b xor c & d"),
            xor(bitor("a", "b"), bitand("c", "d"))
        );
        assert_eq!(expr("a << 1 + b"), shl("a", add(lit(1), "b")));
        assert_eq!(expr("-a * b"), mul(neg("a"), "b"));
        assert_eq!(expr("!a[i] == b"), eq(not(access("a", [idx("i")])), "b"));
        assert_eq!(expr("a * -1"), mul("a", lit(-1)));
        assert_eq!(
            expr("min(a, max(b, 1))"),
            call("min", [name("a"), call("max", [name("b"), lit(1)])])
        );
        assert_eq!(expr("f()"), call("f", []));
        assert_eq!(expr("s[]"), read(access("s", [])));
        assert_eq!(expr("a +\n b"), add("a", "b"));
    }

    #[test]
    fn error_positions() {
        let cases = [
            (
                "for i = _\n  s[] += 1\n",
                "3:1: syntax error: expected `end` to close `for` at 1:1, found end of input",
            ),
            (
                "y .= 0\nfor i = _, j = _\n  y[i] += A[i, j] * \nend\n",
                "4:1: syntax error: expected an expression, found `end`",
            ),
            (
                "if x\n  s = 1\nelse\n  s = 2\nelse\nend",
                "5:1: syntax error: expected `end` to close `if` at 1:1, found `else`",
            ),
            (
                "s = 1\nend",
                "2:1: syntax error: `end` without a matching `for`, `if`, `let` or `begin`",
            ),
            (
                "for end = _\nend",
                "1:5: syntax error: expected a loop index name, found `end`",
            ),
            (
                "for i _\nend",
                "1:7: syntax error: expected `=` after the loop index, found name `_`",
            ),
            (
                "for i = 0 10\nend",
                "1:11: syntax error: expected `:` in the loop range `lo:hi` (or `_` to infer it), found number `10`",
            ),
            (
                "s[] += a b",
                "1:10: syntax error: expected end of line or `;` after the statement, found name `b`",
            ),
            ("s[] ^= 1", "1:5: syntax error: unexpected character `^`"),
            (
                "s[] += (a + b",
                "1:14: syntax error: expected `)` to close `(` at 1:8, found end of input",
            ),
            (
                "A[i, j = 1",
                "1:8: syntax error: expected `,` or `]` in the index list, found `=`",
            ),
            (
                "A[i, j",
                "1:7: syntax error: expected `,` or `]` in the index list, found end of input",
            ),
            (
                "x = 0x1ff",
                "1:5: syntax error: hexadecimal literal `0x1ff` does not fit in a u8 (at most 0xff)",
            ),
            (
                "x <<min>= 1",
                "1:8: syntax error: expected `>>=` to close the reducer opened at 1:5, found `>=`",
            ),
            (
                "x <<choose(y)>>= 1",
                "1:12: syntax error: expected a literal value in `choose(...)`",
            ),
            (
                "@melt(A)",
                "1:2: syntax error: unknown statement `@melt` (expected `@freeze` or `@thaw`)",
            ),
            (
                "let if = 1\nend",
                "1:5: syntax error: expected a variable name, found `if`",
            ),
            (
                "x = xor",
                "1:5: syntax error: expected an expression, found `xor`",
            ),
            (
                "s += walk(i)",
                "1:6: syntax error: `walk(...)` is an access protocol and can only be used as an index, as in `A[walk(i)]`",
            ),
            (
                "begin\n  s = 1",
                "2:8: syntax error: expected `end` to close `begin` at 1:1, found end of input",
            ),
            (
                "x = ~i",
                "1:5: syntax error: expected an expression, found `~`",
            ),
            (
                "y[] .= 0",
                "1:5: syntax error: expected an assignment operator (`=`, `+=`, `<<min>>=` ...), found `.=`",
            ),
            (
                "+= 1",
                "1:1: syntax error: expected a statement, found `+=`",
            ),
            (
                "\n\n  x = 9223372036854775808",
                "3:7: syntax error: integer literal `9223372036854775808` is too large for a 64-bit integer",
            ),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter(|(text, want)| err(text) != *want)
            .map(|(text, want)| format!("{text:?}\n  got  {}\n  want {want}", err(text)))
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("x = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(err(&deep).contains("nesting"));
        let negs = format!("x = {}1", "-".repeat(100_000));
        assert!(err(&negs).contains("nesting"));
        let chain = format!("x = 1{}", " + 1".repeat(100_000));
        assert!(err(&chain).contains("deeper"));
        let blocks = format!("{}{}", "begin\n".repeat(10_000), "end\n".repeat(10_000));
        assert!(err(&blocks).contains("nesting"));
        // Accesses whose indices start with `(` are parsed once each, not twice per level.
        let nested = format!("x = {}i{}", "A[(".repeat(45), ")]".repeat(45));
        assert!(parse_program(&nested).is_ok());
        let too_deep = format!("x = {}i{}", "A[(".repeat(60), ")]".repeat(60));
        assert!(err(&too_deep).contains("nesting"));
        let long_ok = format!("x = 1{}", " + 1".repeat(500));
        assert!(parse_program(&long_ok).is_ok());
    }

    #[test]
    fn keywords_are_not_names() {
        for k in KEYWORDS {
            assert!(parse_program(&format!("{k} .= 0")).is_err(), "{k}");
            assert!(parse_program(&format!("for {k} = _\nend")).is_err(), "{k}");
        }
    }
}
