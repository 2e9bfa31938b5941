//! The QR image of a BR Code: a PNG, base64-encoded, large enough for a phone camera
//! (at least [`QR_IMAGE_PIXELS_MIN`] pixels a side, quiet zone included).

use base64::Engine;

pub const QR_IMAGE_PIXELS_MIN: u32 = 300;

#[derive(Debug, thiserror::Error)]
pub enum QrImageError {
    #[error("the code does not fit a QR symbol: {0}")]
    Encode(String),
    #[error("PNG encoding failed: {0}")]
    Png(String),
}

/// The base64 PNG of `payload`.
pub fn png_base64(payload: &str) -> Result<String, QrImageError> {
    let code = qrcode::QrCode::new(payload.as_bytes()).map_err(|e| QrImageError::Encode(e.to_string()))?;
    let image =
        code.render::<image::Luma<u8>>().min_dimensions(QR_IMAGE_PIXELS_MIN, QR_IMAGE_PIXELS_MIN).build();
    let mut png = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageLuma8(image)
        .write_to(&mut png, image::ImageFormat::Png)
        .map_err(|e| QrImageError::Png(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(png.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_png_decodes_back_to_the_payload() {
        let payload = "00020101021226580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***63041D3D";
        let b64 = png_base64(payload).unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        let img = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png).unwrap().to_luma8();
        assert!(img.width() >= QR_IMAGE_PIXELS_MIN && img.height() >= QR_IMAGE_PIXELS_MIN);
        let mut prepared = rqrr::PreparedImage::prepare(img);
        let grids = prepared.detect_grids();
        assert_eq!(grids.len(), 1);
        let (_, content) = grids[0].decode().unwrap();
        assert_eq!(content, payload);
    }
}
