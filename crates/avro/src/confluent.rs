//! The Confluent wire format of a Kafka record value: byte 0 is the magic byte `0`, bytes 1..5
//! the schema id (big-endian `u32`), then the Avro binary body (topics.md).

use crate::error::WireError;
use crate::registry::SchemaId;

/// The magic byte of the Confluent wire format.
pub const MAGIC: u8 = 0;
/// Length of the prefix before the Avro body.
pub const HEADER_LEN: usize = 5;

/// Frames an Avro body: `[0, id as big-endian u32, body...]`.
pub fn frame(schema_id: SchemaId, avro_body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + avro_body.len());
    out.push(MAGIC);
    out.extend_from_slice(&schema_id.0.to_be_bytes());
    out.extend_from_slice(avro_body);
    out
}

/// Splits a framed value into its schema id and Avro body. Never panics.
pub fn unframe(bytes: &[u8]) -> Result<(SchemaId, &[u8]), WireError> {
    match bytes {
        [] => Err(WireError::Empty),
        [magic, ..] if *magic != MAGIC => Err(WireError::BadMagic { found: *magic }),
        [_, a, b, c, d, body @ ..] => Ok((SchemaId(u32::from_be_bytes([*a, *b, *c, *d])), body)),
        short => Err(WireError::TooShort { len: short.len() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_then_unframe() {
        let framed = frame(SchemaId(0x0102_0304), b"body");
        assert_eq!(framed, [0, 1, 2, 3, 4, b'b', b'o', b'd', b'y']);
        assert_eq!(unframe(&framed), Ok((SchemaId(0x0102_0304), &b"body"[..])));
        assert_eq!(unframe(&[0, 0, 0, 0, 7]), Ok((SchemaId(7), &[][..])));
    }

    #[test]
    fn broken_frames() {
        assert_eq!(unframe(&[]), Err(WireError::Empty));
        assert_eq!(unframe(&[1, 0, 0, 0, 1, 2]), Err(WireError::BadMagic { found: 1 }));
        assert_eq!(unframe(&[0, 0, 0]), Err(WireError::TooShort { len: 3 }));
    }
}
