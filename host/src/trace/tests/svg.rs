//! The SVG timeline: one `class="tile"` rectangle per tile, well-formed XML.

use super::hand_pipelined;
use crate::trace::{SvgOptions, SyntheticTwoStage, Trace};

/// A minimal well-formedness check: tags nest and match, attribute values are quoted, no
/// stray `<` or `&` outside entities, exactly one root element. Returns the element names in
/// document order.
fn check_xml(text: &str) -> Result<Vec<String>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut names = Vec::new();
    let mut rest = text;
    let mut roots = 0;
    while let Some(lt) = rest.find('<') {
        check_text(&rest[..lt])?;
        rest = &rest[lt..];
        if let Some(r) = rest.strip_prefix("<?") {
            rest = &r[r.find("?>").ok_or("unterminated <?")? + 2..];
            continue;
        }
        let gt = rest.find('>').ok_or("unterminated tag")?;
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            match stack.pop() {
                Some(open) if open == name.trim() => continue,
                other => return Err(format!("</{name}> closes {other:?}")),
            }
        }
        let (body, empty) = match tag.strip_suffix('/') {
            Some(b) => (b, true),
            None => (tag, false),
        };
        let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':') {
            return Err(format!("bad element name in <{tag}>"));
        }
        check_attributes(&body[name.len()..])?;
        if stack.is_empty() {
            roots += 1;
        }
        names.push(name.clone());
        if !empty {
            stack.push(name);
        }
    }
    check_text(rest)?;
    match (stack.is_empty(), roots) {
        (true, 1) => Ok(names),
        _ => Err(format!("unclosed {stack:?} or {roots} roots")),
    }
}

fn check_text(t: &str) -> Result<(), String> {
    let mut rest = t;
    while let Some(amp) = rest.find('&') {
        rest = &rest[amp..];
        let semi = rest.find(';').ok_or("& without ;")?;
        let ent = &rest[1..semi];
        if !["amp", "lt", "gt", "quot", "apos"].contains(&ent) && !ent.starts_with('#') {
            return Err(format!("unknown entity &{ent};"));
        }
        rest = &rest[semi + 1..];
    }
    if t.contains('>') {
        // Allowed by XML, but our writer never emits it outside tags.
        return Err(format!("stray > in text {t:?}"));
    }
    Ok(())
}

fn check_attributes(mut a: &str) -> Result<(), String> {
    loop {
        a = a.trim_start();
        if a.is_empty() {
            return Ok(());
        }
        let eq = a.find('=').ok_or_else(|| format!("attribute without value: {a:?}"))?;
        let q = a[eq + 1..].chars().next().ok_or("missing quote")?;
        if q != '"' && q != '\'' {
            return Err(format!("unquoted attribute value: {a:?}"));
        }
        let value_start = eq + 2;
        let end = a[value_start..].find(q).ok_or("unterminated attribute value")?;
        let value = &a[value_start..value_start + end];
        if value.contains('<') {
            return Err(format!("< in attribute value {value:?}"));
        }
        check_text(value)?;
        a = &a[value_start + end + 1..];
    }
}

#[test]
fn one_tile_rect_per_tile_and_well_formed() {
    for trace in [
        hand_pipelined(),
        Trace::synthetic_two_stage(&SyntheticTwoStage::default()),
    ] {
        let svg = trace.to_svg(&SvgOptions::default()).unwrap();
        let names = check_xml(&svg).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names[0], "svg");
        assert_eq!(svg.matches("<rect class=\"tile\"").count(), trace.events.len());
        let waits = trace.events.iter().filter(|e| e.t_ready > e.t_dispatch).count();
        assert_eq!(svg.matches("<rect class=\"wait\"").count(), waits);
    }
}

#[test]
fn labels_are_escaped_and_waves_marked() {
    let mut trace = hand_pipelined();
    trace.meta.label = "a <b> & \"c\"".into();
    trace.meta.stages[1].name = "gemm<2>".into();
    let svg = trace.to_svg(&SvgOptions::default()).unwrap();
    check_xml(&svg).unwrap_or_else(|e| panic!("{e}"));
    assert!(svg.contains("a &lt;b&gt; &amp; &quot;c&quot;"));
    assert!(svg.contains("gemm&lt;2&gt;"));
    // Two waves per stage: labels w1 and w2 in both stages' colours.
    assert_eq!(svg.matches(">w1</text>").count(), 2);
    assert_eq!(svg.matches(">w2</text>").count(), 2);
    assert!(svg.contains("tail producer → gemm&lt;2&gt;: 10.00 µs"));
}

#[test]
fn the_checker_rejects_broken_xml() {
    assert!(check_xml("<svg><rect></svg>").is_err());
    assert!(check_xml("<svg><rect x=1/></svg>").is_err());
    assert!(check_xml("<svg>a & b</svg>").is_err());
    assert!(check_xml("<svg/><svg/>").is_err());
    assert!(check_xml("<svg><g a=\"1\"><rect/></g></svg>").is_ok());
}
