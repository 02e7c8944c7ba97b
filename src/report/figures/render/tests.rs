//! Tests of the renderer: ticks and labels, real glyphs, the size of the
//! SVG and PNG output.

use super::axis::{axis_label, nice_ticks};
use super::*;
use crate::report::figures::chart::{Axis, Chart, Colour, Point, Series, Style};

#[test]
fn nice_ticks_are_round_and_cover_the_range() {
    assert_eq!(nice_ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
    assert_eq!(nice_ticks(-0.3, 2.2, 5), vec![0.0, 0.5, 1.0, 1.5, 2.0]);
    let t = nice_ticks(3.0, 97.0, 6);
    assert_eq!(t, vec![20.0, 40.0, 60.0, 80.0]);
}

#[test]
fn tick_labels_are_short() {
    assert_eq!(tick_label(8.0), "8");
    assert_eq!(tick_label(0.125), "0.125");
    assert_eq!(tick_label(0.5), "0.5");
    assert_eq!(tick_label(2.50000001), "2.5");
    assert_eq!(tick_label(-1.0), "-1");
    assert_eq!(tick_label(1234.6), "1235");
    assert_eq!(tick_label(230810.24), "230810");
    assert_eq!(tick_label(1500.25), "1500");
    assert_eq!(axis_label(0.125, true), "1/8");
    assert_eq!(axis_label(0.75, true), "3/4");
    assert_eq!(axis_label(0.5, true), "1/2");
    assert_eq!(axis_label(1.0, true), "1");
    assert_eq!(axis_label(0.123, true), "0.123");
    assert_eq!(axis_label(0.125, false), "0.125");
}

fn sample_chart(title: &str) -> Chart {
    Chart {
        title: title.into(),
        subtitle: "subtitle".into(),
        x: Axis::linear("x"),
        y: Axis::linear("y").anchored_at_zero(),
        series: vec![Series {
            name: "s".into(),
            style: Style::LinesWithErrorBars,
            colour: Colour::Palette(0),
            points: vec![
                Point::with_ci(0.0, 1.0, 0.5, 1.5),
                Point::with_ci(1.0, 2.0, 1.5, 2.5),
            ],
        }],
        dodge: false,
    }
}

/// Counts dark pixels (all channels < 100) in rows `rows` of a decoded PNG.
fn dark_pixels(png_bytes: &[u8], rows: std::ops::Range<usize>) -> usize {
    let dec = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let w = info.width as usize;
    rows.flat_map(|y| (0..w).map(move |x| (y * w + x) * 3))
        .filter(|&i| buf[i] < 100 && buf[i + 1] < 100 && buf[i + 2] < 100)
        .count()
}

#[test]
fn text_is_drawn_with_real_glyphs() {
    // Different letters must give different amounts of ink: a missing
    // font draws nothing, and a fallback draws the same box for every glyph.
    let thin = to_png(Picture::Single(&sample_chart("iiiiiiiiiiii"))).unwrap();
    let wide = to_png(Picture::Single(&sample_chart("WWWWWWWWWWWW"))).unwrap();
    let a = dark_pixels(&thin, 0..40);
    let b = dark_pixels(&wide, 0..40);
    assert!(a > 20, "title row has ink ({a} dark pixels)");
    assert!(b as f64 > 2.0 * a as f64, "W is wider than i: {b} vs {a}");
}

#[test]
fn bound_figures_draw_a_red_line_over_a_scatter() {
    // The primitives of SCAR Figures 3-5: one marker per trial and the
    // Theorem 1 bound as a red line.
    let scatter: Vec<Point> = (0..50)
        .map(|i| Point::plain(i as f64 / 10.0, (i % 7) as f64))
        .collect();
    let chart = Chart {
        title: "Cost vs perturbation".into(),
        subtitle: String::new(),
        x: Axis::linear("‖δ‖"),
        y: Axis::linear("Iteration cost"),
        series: vec![
            Series {
                name: "trials".into(),
                style: Style::Markers,
                colour: Colour::Palette(0),
                points: scatter,
            },
            Series {
                name: "Theorem 1 bound".into(),
                style: Style::Line,
                colour: Colour::Red,
                points: vec![Point::plain(0.0, 0.0), Point::plain(5.0, 9.0)],
            },
        ],
        dodge: false,
    };
    let bytes = to_png(Picture::Single(&chart)).unwrap();
    let dec = png::Decoder::new(std::io::Cursor::new(&bytes));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    reader.next_frame(&mut buf).unwrap();
    let (r, g, b) = Colour::Red.rgb();
    let red = buf
        .chunks(3)
        .filter(|p| p[0] == r && p[1] == g && p[2] == b)
        .count();
    assert!(red > 500, "{red} pure red pixels");
    let svg = to_svg(Picture::Single(&chart)).unwrap();
    assert!(svg.contains("Theorem 1 bound") && svg.contains("‖δ‖"));
}

#[test]
fn svg_has_the_text_and_png_the_size() {
    let c = sample_chart("A title with <, > & \"quotes\"");
    let svg = to_svg(Picture::Single(&c)).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("A title with <, > & \"quotes\""))
    );
    assert!(texts.iter().any(|t| t.contains("subtitle")));
    let png_bytes = to_png(Picture::Single(&c)).unwrap();
    let dec = png::Decoder::new(std::io::Cursor::new(&png_bytes));
    let reader = dec.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), SINGLE_SIZE);
}
