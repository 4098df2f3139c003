//! Reading and writing Avro `Value`s for the wire structs.
//!
//! Schema resolution is done here, by name, instead of by `apache_avro`'s `Value::resolve`:
//! that one picks a union branch of records by trying each branch's *shape* in order, so a
//! `Slack {from, text}` written by one version would be read as the `Sms {from, text}` branch
//! (and an `Email` too, since extra fields are dropped). A body is therefore decoded with its
//! writer schema only, and the wire structs read it following the Avro resolution rules:
//!
//! - record fields are matched by name; a field the writer lacks takes the reader's default
//!   (written next to the field in `wire.rs`, equal to the `.avsc` default), or is an error;
//!   writer fields the reader does not know are skipped;
//! - union branches of records are matched by (unqualified) record name;
//! - a writer union read as a non-union takes the branch's value; a writer non-union read as
//!   an optional is `Some`;
//! - promotions: int to long, int/long/float to double, bytes to string (UTF-8).

use apache_avro::schema::{NamesRef, RecordSchema, Schema};
use apache_avro::types::Value;

use crate::error::{FieldError, FieldProblem};

/// The writer schema's named types, to follow `Schema::Ref`.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub(crate) names: &'a NamesRef<'a>,
}

impl<'a> Ctx<'a> {
    pub(crate) fn deref(self, schema: &'a Schema) -> Result<&'a Schema, FieldError> {
        match schema {
            Schema::Ref { name } => self.names.get(name).copied().ok_or_else(|| {
                FieldError::here(FieldProblem::Inconsistent(format!(
                    "writer schema references undefined type {}",
                    name.name()
                )))
            }),
            other => Ok(other),
        }
    }
}

/// A wire type that reads itself from a value written with `schema`.
pub(crate) trait FromDatum: Sized {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError>;
}

/// A wire type that writes itself as an Avro value of the newest schema.
pub(crate) trait ToDatum {
    fn to_datum(self) -> Value;
}

/// A wire struct that is an Avro record.
pub trait WireRecord {
    /// The unqualified Avro record name.
    const NAME: &'static str;
}

pub(crate) fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::Int(_) => "int",
        Value::Long(_) => "long",
        Value::Float(_) => "float",
        Value::Double(_) => "double",
        Value::Bytes(_) => "bytes",
        Value::String(_) => "string",
        Value::Fixed(..) => "fixed",
        Value::Enum(..) => "enum",
        Value::Union(..) => "union",
        Value::Array(_) => "array",
        Value::Map(_) => "map",
        Value::Record(_) => "record",
        Value::TimestampMicros(_) => "timestamp-micros",
        Value::TimestampMillis(_) => "timestamp-millis",
        Value::TimestampNanos(_) => "timestamp-nanos",
        _ => "logical type",
    }
}

fn type_error(expected: &'static str, found: &Value) -> FieldError {
    FieldError::here(FieldProblem::Type { expected, found: value_kind(found) })
}

/// Steps into the written branch when the writer used a union.
fn unwrap_union<'a>(
    value: Value,
    schema: &'a Schema,
    ctx: Ctx<'a>,
) -> Result<(Value, &'a Schema), FieldError> {
    let schema = ctx.deref(schema)?;
    match (value, schema) {
        (Value::Union(i, inner), Schema::Union(u)) => {
            let branch = u.variants().get(i as usize).ok_or_else(|| {
                FieldError::here(FieldProblem::Inconsistent(format!(
                    "union branch {i} is not in the writer schema"
                )))
            })?;
            Ok((*inner, ctx.deref(branch)?))
        }
        (Value::Union(_, inner), s) => Ok((*inner, s)),
        (v, s) => Ok((v, s)),
    }
}

impl FromDatum for String {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError> {
        match unwrap_union(value, schema, ctx)?.0 {
            Value::String(s) => Ok(s),
            Value::Bytes(b) => String::from_utf8(b).map_err(|_| {
                FieldError::here(FieldProblem::Type { expected: "string", found: "bytes (not UTF-8)" })
            }),
            other => Err(type_error("string", &other)),
        }
    }
}

impl ToDatum for String {
    fn to_datum(self) -> Value {
        Value::String(self)
    }
}

impl FromDatum for i64 {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError> {
        match unwrap_union(value, schema, ctx)?.0 {
            Value::Long(n) => Ok(n),
            Value::Int(n) => Ok(i64::from(n)),
            other => Err(type_error("long", &other)),
        }
    }
}

impl ToDatum for i64 {
    fn to_datum(self) -> Value {
        Value::Long(self)
    }
}

impl FromDatum for f64 {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError> {
        match unwrap_union(value, schema, ctx)?.0 {
            Value::Double(n) => Ok(n),
            Value::Float(n) => Ok(f64::from(n)),
            Value::Int(n) => Ok(f64::from(n)),
            #[allow(clippy::cast_precision_loss)] // the Avro long-to-double promotion
            Value::Long(n) => Ok(n as f64),
            other => Err(type_error("double", &other)),
        }
    }
}

impl ToDatum for f64 {
    fn to_datum(self) -> Value {
        Value::Double(self)
    }
}

impl FromDatum for bool {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError> {
        match unwrap_union(value, schema, ctx)?.0 {
            Value::Boolean(b) => Ok(b),
            other => Err(type_error("boolean", &other)),
        }
    }
}

impl ToDatum for bool {
    fn to_datum(self) -> Value {
        Value::Boolean(self)
    }
}

/// An Avro `long` with `logicalType: timestamp-micros`: microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimestampMicros(pub i64);

impl FromDatum for TimestampMicros {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError> {
        match unwrap_union(value, schema, ctx)?.0 {
            Value::TimestampMicros(n) | Value::Long(n) => Ok(TimestampMicros(n)),
            Value::TimestampMillis(n) => n.checked_mul(1000).map(TimestampMicros).ok_or_else(|| {
                FieldError::here(FieldProblem::OutOfRange {
                    found: n,
                    expected: "a timestamp-millis within i64 micros",
                })
            }),
            other => Err(type_error("timestamp-micros", &other)),
        }
    }
}

impl ToDatum for TimestampMicros {
    fn to_datum(self) -> Value {
        Value::TimestampMicros(self.0)
    }
}

/// `["null", T]`, null first, default null.
impl<T: FromDatum> FromDatum for Option<T> {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError> {
        let (value, schema) = unwrap_union(value, schema, ctx)?;
        match value {
            Value::Null => Ok(None),
            v => T::from_datum(v, schema, ctx).map(Some),
        }
    }
}

impl<T: ToDatum> ToDatum for Option<T> {
    fn to_datum(self) -> Value {
        match self {
            None => Value::Union(0, Box::new(Value::Null)),
            Some(v) => Value::Union(1, Box::new(v.to_datum())),
        }
    }
}

impl<T: FromDatum> FromDatum for Vec<T> {
    fn from_datum<'a>(value: Value, schema: &'a Schema, ctx: Ctx<'a>) -> Result<Self, FieldError> {
        let (value, schema) = unwrap_union(value, schema, ctx)?;
        let (Value::Array(items), Schema::Array(array)) = (value, schema) else {
            return Err(FieldError::here(FieldProblem::Type { expected: "array", found: "another type" }));
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| T::from_datum(item, &array.items, ctx).map_err(|e| e.at(i)))
            .collect()
    }
}

impl<T: ToDatum> ToDatum for Vec<T> {
    fn to_datum(self) -> Value {
        Value::Array(self.into_iter().map(ToDatum::to_datum).collect())
    }
}

/// A record being read: its fields in writer order and the writer's record schema.
pub(crate) struct Rec<'a> {
    fields: Vec<(String, Value)>,
    schema: &'a RecordSchema,
    ctx: Ctx<'a>,
}

impl<'a> Rec<'a> {
    pub(crate) fn open(
        value: Value,
        schema: &'a Schema,
        ctx: Ctx<'a>,
        name: &'static str,
    ) -> Result<Self, FieldError> {
        let (value, schema) = unwrap_union(value, schema, ctx)?;
        match (value, schema) {
            (Value::Record(fields), Schema::Record(record)) => {
                if record.name.name() != name {
                    return Err(FieldError::here(FieldProblem::Inconsistent(format!(
                        "writer record is {}, expected {name}",
                        record.name.name()
                    ))));
                }
                Ok(Rec { fields, schema: record, ctx })
            }
            (other, _) => Err(type_error("record", &other)),
        }
    }

    fn take(&mut self, name: &str) -> Option<(Value, &'a Schema)> {
        let index = *self.schema.lookup.get(name)?;
        let field_schema = &self.schema.fields.get(index)?.schema;
        // Decoded records keep the writer's field order; fall back to a search otherwise.
        let slot = match self.fields.get_mut(index) {
            Some((n, v)) if n == name => v,
            _ => &mut self.fields.iter_mut().find(|(n, _)| n == name)?.1,
        };
        Some((std::mem::replace(slot, Value::Null), field_schema))
    }

    /// A field the reader requires (no default).
    pub(crate) fn req<T: FromDatum>(&mut self, name: &'static str) -> Result<T, FieldError> {
        match self.take(name) {
            Some((v, s)) => T::from_datum(v, s, self.ctx).map_err(|e| e.under(name)),
            None => Err(FieldError::new(name, FieldProblem::Missing)),
        }
    }

    /// A field with a default, used when the writer schema lacks it.
    pub(crate) fn or<T: FromDatum>(
        &mut self,
        name: &'static str,
        default: impl FnOnce() -> T,
    ) -> Result<T, FieldError> {
        match self.take(name) {
            Some((v, s)) => T::from_datum(v, s, self.ctx).map_err(|e| e.under(name)),
            None => Ok(default()),
        }
    }
}

/// Finds the branch a union value was written with and its record name.
pub(crate) fn union_branch<'a>(
    value: Value,
    schema: &'a Schema,
    ctx: Ctx<'a>,
) -> Result<(Value, &'a Schema, &'a str), FieldError> {
    let (value, schema) = unwrap_union(value, schema, ctx)?;
    match schema {
        Schema::Record(r) => Ok((value, schema, r.name.name())),
        _ => Err(type_error("record (a union branch)", &value)),
    }
}

/// Declares a wire struct mirroring an Avro record, with its reader and writer. Fields are
/// listed in schema order; `= default` gives the reader's default for a field the writer lacks
/// (the `.avsc` default).
macro_rules! wire_record {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty $(= $default:expr)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::datum::WireRecord for $name {
            const NAME: &'static str = stringify!($name);
        }

        impl $crate::datum::ToDatum for $name {
            fn to_datum(self) -> apache_avro::types::Value {
                apache_avro::types::Value::Record(vec![
                    $( (stringify!($field).to_owned(), $crate::datum::ToDatum::to_datum(self.$field)), )*
                ])
            }
        }

        impl $crate::datum::FromDatum for $name {
            #[allow(unused_mut, unused_variables)]
            fn from_datum<'a>(
                value: apache_avro::types::Value,
                schema: &'a apache_avro::Schema,
                ctx: $crate::datum::Ctx<'a>,
            ) -> Result<Self, $crate::error::FieldError> {
                let mut rec = $crate::datum::Rec::open(value, schema, ctx, stringify!($name))?;
                Ok($name {
                    $( $field: wire_record!(@read rec, $field $(, $default)?), )*
                })
            }
        }
    };
    (@read $rec:ident, $field:ident) => { $rec.req(stringify!($field))? };
    (@read $rec:ident, $field:ident, $default:expr) => { $rec.or(stringify!($field), || $default)? };
}

/// Declares a wire enum mirroring an Avro union of records; each variant is named after, and
/// holds, the wire struct of its record. Variants are listed in schema order (the writer uses
/// the position as the union index; a test checks it against the newest schema).
macro_rules! wire_union {
    (
        $(#[$meta:meta])*
        $name:ident { $( $variant:ident ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $variant($variant), )*
        }

        impl $name {
            /// The Avro record names of the branches, in schema order.
            pub const BRANCHES: &'static [&'static str] = &[ $( stringify!($variant), )* ];

            /// The Avro record name of this branch.
            pub fn branch(&self) -> &'static str {
                match self {
                    $( $name::$variant(_) => stringify!($variant), )*
                }
            }

            fn branch_index(&self) -> u32 {
                let name = self.branch();
                let mut i = 0u32;
                for b in Self::BRANCHES {
                    if *b == name {
                        break;
                    }
                    i += 1;
                }
                i
            }
        }

        impl $crate::datum::ToDatum for $name {
            fn to_datum(self) -> apache_avro::types::Value {
                let index = self.branch_index();
                let inner = match self {
                    $( $name::$variant(r) => $crate::datum::ToDatum::to_datum(r), )*
                };
                apache_avro::types::Value::Union(index, Box::new(inner))
            }
        }

        impl $crate::datum::FromDatum for $name {
            fn from_datum<'a>(
                value: apache_avro::types::Value,
                schema: &'a apache_avro::Schema,
                ctx: $crate::datum::Ctx<'a>,
            ) -> Result<Self, $crate::error::FieldError> {
                let (value, branch, name) = $crate::datum::union_branch(value, schema, ctx)?;
                match name {
                    $( stringify!($variant) => Ok($name::$variant(
                        $crate::datum::FromDatum::from_datum(value, branch, ctx)?,
                    )), )*
                    other => Err($crate::error::FieldError::here(
                        $crate::error::FieldProblem::UnknownBranch {
                            found: other.to_owned(),
                            expected: Self::BRANCHES,
                        },
                    )),
                }
            }
        }
    };
}

pub(crate) use {wire_record, wire_union};
