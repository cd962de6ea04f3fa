//! PNG images, read as 2-d `u8` grayscale arrays: rows (top to bottom) are the first index,
//! columns the second, so `img[y, x]` is the pixel in row `y`, column `x`.
//!
//! Every PNG flavour is brought to one 8-bit gray value per pixel, the way Pillow's
//! `Image.convert("L")` does, so reference values computed with Pillow agree bit for bit:
//! - gray of 1, 2 or 4 bits is scaled to 0..255 (a 1-bit image becomes 0 / 255);
//! - 16-bit samples keep their high byte;
//! - palette images are expanded to their RGB colours first;
//! - colour is mixed with the ITU-R 601-2 luma weights in Pillow's fixed point,
//!   `(19595 R + 38470 G + 7471 B + 0x8000) >> 16` (≈ 0.299 R + 0.587 G + 0.114 B);
//! - alpha is dropped (not composited), as Pillow does.
//!
//! Only the first frame of an animated PNG is read.

use super::DenseData;
use crate::error::{Error, Result};
use crate::runtime::Buffer;
use ::png::{ColorType, Transformations};
use std::io::{BufRead, Seek};

/// Pillow's `L = R * 299/1000 + G * 587/1000 + B * 114/1000`, in its 16-bit fixed point.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    let l = (r as u32 * 19595 + g as u32 * 38470 + b as u32 * 7471 + 0x8000) >> 16;
    // The weights sum to 65536, so `l <= 255`.
    l as u8
}

/// Decode a PNG stream into a `height x width` array of `u8` gray values.
pub fn read_png<R: BufRead + Seek>(r: R, path: &str) -> Result<DenseData> {
    let bad =
        |e: ::png::DecodingError| Error::file(path, 0, format!("not a readable PNG image: {e}"));
    // The decoder's own buffers are held to the memory limit too (its default is 64 MiB).
    let limits = ::png::Limits {
        bytes: crate::runtime::memory::max_memory()
            .or_else(crate::runtime::memory::available)
            .map_or(usize::MAX, |b| usize::try_from(b).unwrap_or(usize::MAX)),
    };
    let mut decoder = ::png::Decoder::new_with_limits(r, limits);
    // EXPAND: palette → RGB(A), low-depth gray → 8 bits; STRIP_16: 16 → 8 bits (high byte).
    decoder.set_transformations(Transformations::EXPAND | Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(bad)?;
    // The header's size is checked before anything of that size is allocated: a 69-byte
    // file can claim 100000 x 100000 pixels.
    let (width, height) = (reader.info().width as usize, reader.info().height as usize);
    let size = reader.output_buffer_size();
    let bytes = size.and_then(|raw| raw.checked_add(width.checked_mul(height)?));
    crate::runtime::memory::check(
        path,
        &[height, width],
        "Dense(Dense(Element(0x00)))",
        bytes.map(|b| b as u64),
    )?;
    let mut raw = vec![0u8; size.unwrap_or(0)];
    // The decoder itself panics on some malformed palettes (png 0.18.1, `palette.rs`: a slice
    // index out of range, found by the `png` fuzz target): a hostile file must give an error,
    // so its panic becomes one. Nothing shared is left half-updated: `raw` is discarded.
    let frame =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.next_frame(&mut raw)));
    let info = match frame {
        Ok(r) => r.map_err(bad)?,
        Err(_) => {
            return Err(Error::file(
                path,
                0,
                "not a readable PNG image: the decoder failed on its pixel data",
            ));
        }
    };
    let (w, h) = (info.width as usize, info.height as usize);
    let channels = match info.color_type {
        ColorType::Grayscale => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb => 3,
        ColorType::Rgba => 4,
        // EXPAND turns palettes into colours; a palette left here means a broken stream.
        ColorType::Indexed => {
            return Err(Error::file(path, 0, "palette image could not be expanded"));
        }
    };
    if info.bit_depth != ::png::BitDepth::Eight {
        return Err(Error::file(
            path,
            0,
            format!("unexpected bit depth {:?} after decoding", info.bit_depth),
        ));
    }
    let mut gray = Vec::with_capacity(w * h);
    for row in raw.chunks(info.line_size).take(h) {
        for px in row[..w * channels].chunks_exact(channels) {
            gray.push(match channels {
                1 | 2 => px[0],
                _ => luma(px[0], px[1], px[2]),
            });
        }
    }
    if gray.len() != w * h {
        return Err(Error::file(path, 0, "image data ends before the last row"));
    }
    Ok(DenseData {
        shape: vec![h, w],
        values: Buffer::U8(gray.into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// Encode `data` (rows of `width * samples` values) as a PNG in memory.
    fn encode(
        width: u32,
        height: u32,
        color: ColorType,
        depth: ::png::BitDepth,
        data: &[u8],
    ) -> Vec<u8> {
        encode_with(width, height, color, depth, data, None)
    }

    fn encode_with(
        width: u32,
        height: u32,
        color: ColorType,
        depth: ::png::BitDepth,
        data: &[u8],
        palette: Option<Vec<u8>>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut e = ::png::Encoder::new(&mut out, width, height);
            e.set_color(color);
            e.set_depth(depth);
            if let Some(p) = palette {
                e.set_palette(p);
            }
            let mut w = e.write_header().unwrap();
            w.write_image_data(data).unwrap();
        }
        out
    }

    fn read(bytes: Vec<u8>) -> Result<DenseData> {
        read_png(Cursor::new(bytes), "img.png")
    }

    #[test]
    fn gray8_keeps_values_rows_first() {
        let d = read(encode(
            3,
            2,
            ColorType::Grayscale,
            ::png::BitDepth::Eight,
            &[0, 1, 2, 10, 20, 255],
        ))
        .unwrap();
        assert_eq!(d.shape, vec![2, 3]);
        assert_eq!(d.values, Buffer::U8(vec![0, 1, 2, 10, 20, 255].into()));
    }

    #[test]
    fn colour_uses_pillow_luma_and_drops_alpha() {
        let rgb = [255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30];
        let d = read(encode(4, 1, ColorType::Rgb, ::png::BitDepth::Eight, &rgb)).unwrap();
        // Pillow: Image.new("RGB", ...).convert("L") gives 76, 150, 29, 124 for these pixels.
        assert_eq!(d.values, Buffer::U8(vec![76, 150, 29, 124].into()));
        let rgba = [255, 0, 0, 0, 10, 200, 30, 255];
        let d = read(encode(2, 1, ColorType::Rgba, ::png::BitDepth::Eight, &rgba)).unwrap();
        assert_eq!(d.values, Buffer::U8(vec![76, 124].into()));
        let ga = [7, 0, 9, 255];
        let d = read(encode(
            2,
            1,
            ColorType::GrayscaleAlpha,
            ::png::BitDepth::Eight,
            &ga,
        ))
        .unwrap();
        assert_eq!(d.values, Buffer::U8(vec![7, 9].into()));
    }

    #[test]
    fn low_and_high_depths_become_eight_bits() {
        // 1-bit: 0b1010_0000 → pixels 1, 0, 1, 0.
        let d = read(encode(
            4,
            1,
            ColorType::Grayscale,
            ::png::BitDepth::One,
            &[0b1010_0000],
        ))
        .unwrap();
        assert_eq!(d.values, Buffer::U8(vec![255, 0, 255, 0].into()));
        // 16-bit big-endian samples keep their high byte.
        let d = read(encode(
            2,
            1,
            ColorType::Grayscale,
            ::png::BitDepth::Sixteen,
            &[0x12, 0x34, 0xff, 0x01],
        ))
        .unwrap();
        assert_eq!(d.values, Buffer::U8(vec![0x12, 0xff].into()));
    }

    #[test]
    fn palette_expands_to_colours_then_gray() {
        let palette = vec![0, 0, 0, 255, 0, 0, 10, 200, 30];
        let bytes = encode_with(
            3,
            1,
            ColorType::Indexed,
            ::png::BitDepth::Eight,
            &[2, 1, 0],
            Some(palette),
        );
        assert_eq!(
            read(bytes).unwrap().values,
            Buffer::U8(vec![124, 76, 0].into())
        );
    }

    /// CRC-32 of PNG chunks (ISO 3309), bit by bit: enough for a few hand-made chunks.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in bytes {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }

    /// A tiny PNG whose header claims `width x height` 8-bit gray pixels.
    fn lying_header(width: u32, height: u32) -> Vec<u8> {
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = width.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&height.to_be_bytes());
        ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &ihdr);
        // A zlib stream of one empty stored block.
        chunk(
            &mut out,
            b"IDAT",
            &[0x78, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff, 0, 0, 0, 1],
        );
        chunk(&mut out, b"IEND", &[]);
        out
    }

    #[test]
    fn a_huge_header_is_refused_before_allocating() {
        // 10^12 pixels: more than any machine's memory.
        let bytes = lying_header(1_000_000, 1_000_000);
        assert!(bytes.len() < 100, "{} bytes", bytes.len());
        match read(bytes) {
            Err(Error::Memory { tensor, shape, .. }) => {
                assert_eq!(tensor, "img.png");
                assert_eq!(shape, vec![1_000_000, 1_000_000]);
            }
            // Without /proc/meminfo there is no limit, and the data is simply missing.
            Err(Error::File { .. }) if crate::runtime::memory::available().is_none() => {}
            other => panic!("expected a memory error, got {other:?}"),
        }
    }

    #[test]
    fn malformed_files_name_the_file() {
        for bytes in [
            b"not a png at all".to_vec(),
            Vec::new(),
            // A valid image cut in the middle of its data.
            encode(
                64,
                64,
                ColorType::Grayscale,
                ::png::BitDepth::Eight,
                &[3u8; 4096],
            )[..60]
                .to_vec(),
        ] {
            match read(bytes) {
                Err(Error::File { path, .. }) => assert_eq!(path, "img.png"),
                other => panic!("expected a file error, got {other:?}"),
            }
        }
    }

    /// Found by the `png` fuzz target: the png crate's palette expansion panics on this file
    /// (a slice index out of range); reading it must give an error, not a panic.
    #[test]
    fn a_palette_the_decoder_panics_on_is_an_error() {
        let bytes: [u8; 96] = [
            137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 39, 0, 1, 53, 1,
            2, 3, 0, 0, 1, 132, 82, 231, 94, 0, 0, 0, 28, 80, 76, 84, 69, 0, 0, 0, 255, 255, 255,
            255, 0, 0, 0, 255, 0, 1, 29, 0, 1, 29, 48, 74, 0, 0, 0, 10, 73, 68, 65, 84, 120, 156,
            99, 48, 74, 0, 0, 0, 10, 73, 68, 65, 84, 120, 156, 99, 96, 96, 100, 98, 29, 0, 28, 142,
            0, 0, 73, 130,
        ];
        let e = read_png(std::io::Cursor::new(&bytes[..]), "bad.png").unwrap_err();
        assert!(e.to_string().contains("bad.png"), "{e}");
    }
}
