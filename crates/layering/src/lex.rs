//! Just enough of Rust's lexical grammar to find `mod name;` declarations and the
//! `crate::` / `super::` / `self::` paths of one file, outside comments and literals, plus the
//! paths that start with a child module the file declares (`pub use head::LogHead;`).

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub line: usize,
}

/// Splits source text into identifiers and punctuation. Comments, string, byte-string, raw
/// string, char and number literals and lifetimes produce no token.
pub(crate) fn tokenize(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied();
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            i = skip_block_comment(&c, i, &mut line);
        } else if ch == '"' {
            i = skip_string(&c, i + 1, &mut line);
        } else if ch == '\'' {
            i = skip_char_or_lifetime(&c, i);
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            i = skip_ident(&c, i);
            let word: String = c[start..i].iter().collect();
            match (word.as_str(), c.get(i)) {
                ("r" | "br" | "cr", Some('#' | '"')) if is_raw_string(&c, i) => {
                    i = skip_raw_string(&c, i, &mut line);
                }
                ("b" | "c", Some('"')) => i = skip_string(&c, i + 1, &mut line),
                ("b", Some('\'')) => i = skip_char(&c, i),
                ("r", Some('#')) => {
                    // A raw identifier, `r#name`.
                    let start = i + 1;
                    i = skip_ident(&c, start);
                    let name = c[start..i].iter().collect();
                    out.push(Token {
                        tok: Tok::Ident(name),
                        line,
                    });
                }
                _ => out.push(Token {
                    tok: Tok::Ident(word),
                    line,
                }),
            }
        } else if ch.is_ascii_digit() {
            i = skip_ident(&c, i);
        } else if ch == ':' && next == Some(':') {
            out.push(Token {
                tok: Tok::PathSep,
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(ch),
                line,
            });
            i += 1;
        }
    }
    out
}

fn skip_ident(c: &[char], mut i: usize) -> usize {
    while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
        i += 1;
    }
    i
}

/// `i` is at the `/` of `/*`; block comments nest.
fn skip_block_comment(c: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut depth = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            if c[i] == '\n' {
                *line += 1;
            }
            i += 1;
        }
    }
    i
}

/// `i` is just after the opening `"`.
fn skip_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => {
                if c.get(i + 1) == Some(&'\n') {
                    *line += 1;
                }
                i += 2;
            }
            '"' => return i + 1,
            '\n' => {
                *line += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    i
}

/// `i` is just after the `r`, `br` or `cr` prefix: is it `#...#"` or `"`?
fn is_raw_string(c: &[char], mut i: usize) -> bool {
    while c.get(i) == Some(&'#') {
        i += 1;
    }
    c.get(i) == Some(&'"')
}

/// `i` is at the first `#` or the `"` of a raw string.
fn skip_raw_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut hashes = 0;
    while c[i] == '#' {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        if c[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i
}

/// `i` is at a `'`: a char literal (`'x'`, `'\n'`, `'\''`) or a lifetime or label (`'a`).
fn skip_char_or_lifetime(c: &[char], i: usize) -> usize {
    if c.get(i + 1) == Some(&'\\') || c.get(i + 2) == Some(&'\'') {
        skip_char(c, i)
    } else {
        skip_ident(c, i + 1)
    }
}

/// `i` is at the opening `'` of a char or byte literal.
fn skip_char(c: &[char], i: usize) -> usize {
    let mut j = i + 1;
    if c.get(j) == Some(&'\\') {
        j += 2;
    }
    while j < c.len() && c[j] != '\'' && c[j] != '\n' {
        j += 1;
    }
    j + 1
}

/// What one file declares and refers to.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// `mod name;` declarations: the inline modules around the declaration, the name, the line.
    pub decls: Vec<(Vec<String>, String, usize)>,
    /// Every `crate::`, `super::` and `self::` path (one per leaf of a `use` tree), made
    /// absolute (segments from the crate root), with the line of its last segment.
    pub paths: Vec<(Vec<String>, usize)>,
}

/// Scans the tokens of the file whose module path is `module` (empty for the crate root).
pub(crate) fn scan(tokens: &[Token], module: &[String]) -> Scan {
    let mut scan = Scan::default();
    // Child modules this file declares (`mod name;`): a path that starts with one (`use
    // head::LogHead;`, a parent re-exporting its child) is an edge to that child too.
    let children: Vec<&str> = tokens
        .windows(3)
        .filter_map(|w| match (&w[0].tok, &w[1].tok, &w[2].tok) {
            (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')) if m == "mod" => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let mut depth = 0;
    // Inline modules (`mod tests { ... }`) we are in: name and the brace depth outside them.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let tok = |i: usize| tokens.get(i).map(|t| &t.tok);
    for (i, token) in tokens.iter().enumerate() {
        match &token.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = usize::saturating_sub(depth, 1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(word) if word == "mod" => {
                if let Some(Tok::Ident(name)) = tok(i + 1) {
                    match tok(i + 2) {
                        Some(Tok::Punct(';')) => {
                            let around = inline.iter().map(|(n, _)| n.clone()).collect();
                            scan.decls.push((around, name.clone(), token.line));
                        }
                        Some(Tok::Punct('{')) => inline.push((name.clone(), depth)),
                        _ => {}
                    }
                }
            }
            Tok::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && tok(i + 1) == Some(&Tok::PathSep)
                    && (i == 0 || tok(i - 1) != Some(&Tok::PathSep))
                    && !in_visibility(tokens, i) =>
            {
                let mut here = module.to_vec();
                here.extend(inline.iter().map(|(n, _)| n.clone()));
                path_leaves(tokens, i, here, &mut scan.paths);
            }
            Tok::Ident(word)
                if inline.is_empty()
                    && children.contains(&word.as_str())
                    && tok(i + 1) == Some(&Tok::PathSep)
                    && (i == 0 || tok(i - 1) != Some(&Tok::PathSep)) =>
            {
                use_tree(tokens, i, module.to_vec(), token.line, &mut scan.paths);
            }
            _ => {}
        }
    }
    scan
}

/// Is the path at `i` the `crate::a` of `pub(in crate::a)`? That is a visibility, not a use.
fn in_visibility(tokens: &[Token], i: usize) -> bool {
    i >= 3
        && tokens[i - 1].tok == Tok::Ident("in".into())
        && tokens[i - 2].tok == Tok::Punct('(')
        && tokens[i - 3].tok == Tok::Ident("pub".into())
}

/// The path starting at `tokens[i]` (`crate`, `super` or `self`, then `::`), seen from module
/// `here`: pushes one absolute path per leaf onto `out`. A `super::` above the root is ignored.
fn path_leaves(tokens: &[Token], i: usize, here: Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    let mut base = match &tokens[i].tok {
        Tok::Ident(w) if w == "crate" => Vec::new(),
        _ => here,
    };
    let mut j = i;
    loop {
        match (
            tokens.get(j).map(|t| &t.tok),
            tokens.get(j + 1).map(|t| &t.tok),
        ) {
            (Some(Tok::Ident(w)), Some(Tok::PathSep)) if w == "super" => {
                if base.pop().is_none() {
                    return;
                }
            }
            (Some(Tok::Ident(w)), Some(Tok::PathSep))
                if j == i && (w == "crate" || w == "self") => {}
            _ => break,
        }
        j += 2;
    }
    use_tree(tokens, j, base, tokens[i].line, out);
}

/// Reads the rest of a path or `use` tree from `tokens[j]` (just after a `::`), each leaf
/// prefixed by `path`. Returns the index after it.
fn use_tree(
    tokens: &[Token],
    mut j: usize,
    mut path: Vec<String>,
    mut line: usize,
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let tok = |j: usize| tokens.get(j).map(|t| &t.tok);
    loop {
        match tok(j) {
            // `{self, ...}` names the prefix itself.
            Some(Tok::Ident(w)) if w == "self" => {
                out.push((path, tokens[j].line));
                return j + 1;
            }
            Some(Tok::Ident(w)) => {
                path.push(w.clone());
                line = tokens[j].line;
                j += 1;
                if tok(j) == Some(&Tok::PathSep) {
                    j += 1;
                } else {
                    out.push((path, line));
                    return j;
                }
            }
            Some(Tok::Punct('{')) => {
                j += 1;
                loop {
                    match tok(j) {
                        None => return j,
                        Some(Tok::Punct('}')) => return j + 1,
                        Some(Tok::Punct(',')) => j += 1,
                        Some(_) => {
                            j = use_tree(tokens, j, path.clone(), line, out).max(j + 1);
                            // Skip what may follow a leaf, such as `as name`.
                            while !matches!(tok(j), None | Some(Tok::Punct(',' | '}'))) {
                                j += 1;
                            }
                        }
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                out.push((path, tokens[j].line));
                return j + 1;
            }
            // The end of the path, e.g. the `<` of `crate::a::Foo::<T>`.
            _ => {
                out.push((path, line));
                return j;
            }
        }
    }
}
