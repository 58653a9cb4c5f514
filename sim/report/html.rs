//! A self-contained `report.html`: tables and the SVG pictures inline, no
//! scripts, no external files.

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A table from a header and rows of cells (escaped here).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table>\n<tr>");
    for h in header {
        out += &format!("<th>{}</th>", esc(h));
    }
    out += "</tr>\n";
    for r in rows {
        out += "<tr>";
        for c in r {
            out += &format!("<td>{}</td>", esc(c));
        }
        out += "</tr>\n";
    }
    out + "</table>\n"
}

/// One section of a report.
pub enum Block {
    Heading(String),
    Paragraph(String),
    /// Already HTML (from [`table`]).
    Table(String),
    /// An SVG picture and its caption.
    Svg(String, String),
}

/// The whole page.
pub fn page(title: &str, blocks: &[Block]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\n\
         body {{ font-family: 'DejaVu Sans', sans-serif; margin: 24px; color: #222; background: #fff; }}\n\
         table {{ border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }}\n\
         th, td {{ border: 1px solid #bbb; padding: 3px 8px; text-align: left; }}\n\
         th {{ background: #eef; }}\n\
         figure {{ margin: 12px 0 24px; }} figure svg {{ max-width: 100%; height: auto; border: 1px solid #ddd; }}\n\
         .fail {{ color: #b00; font-weight: bold; }} .pass {{ color: #070; font-weight: bold; }}\n\
         </style></head><body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
    for b in blocks {
        match b {
            Block::Heading(h) => out += &format!("<h2>{}</h2>\n", esc(h)),
            Block::Paragraph(p) => out += &format!("<p>{p}</p>\n"),
            Block::Table(t) => out += t,
            Block::Svg(svg, caption) => {
                // Drop the XML declaration so the SVG can sit inside HTML.
                let body = svg.trim_start_matches(|c| c != '<');
                let body = if body.starts_with("<?xml") {
                    body.split_once("?>").map_or(body, |(_, rest)| rest)
                } else {
                    body
                };
                out += &format!(
                    "<figure>{}<figcaption>{}</figcaption></figure>\n",
                    body,
                    esc(caption)
                );
            }
        }
    }
    out + "</body></html>\n"
}
