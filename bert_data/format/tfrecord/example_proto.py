"""Records that are not in the canonical layout, parsed by the ``protobuf`` package.

:mod:`bert_data.format.tfrecord.example_codec` reads the canonical bytes (what protobuf, TensorFlow and
this tool write: one packed list per feature) itself, fast.  Anything else (non-packed lists,
unknown fields, repeated messages, bytes lists, malformed data) is handed to protobuf here, with
the ``tf.train.Example`` messages declared in code (a ``FileDescriptorProto``), so that neither
TensorFlow nor a compiled ``.proto`` is needed.  protobuf is an optional dependency (the
``proto`` extra): without it such records raise a one-line ``ImportError``.
"""

from __future__ import annotations

import functools
from typing import Dict, Tuple

# Feature oneof field numbers, as in tensorflow/core/example/feature.proto.
BYTES_LIST = 1
FLOAT_LIST = 2
INT64_LIST = 3
KIND_NAMES = {BYTES_LIST: "bytes_list", FLOAT_LIST: "float_list", INT64_LIST: "int64_list"}

_PACKAGE = "bert_data.example"
MISSING_PROTOBUF = ("a record is not in the canonical tf.train.Example layout, and reading it needs the protobuf "
                    "package (pip install 'bert_data[proto]'); canonical records, as bert_data and Google's "
                    "create_pretraining_data.py write them, are read without it")


@functools.lru_cache(maxsize=None)
def example_class():
    """The ``Example`` message class (feature.proto and example.proto of TensorFlow, proto3)."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise ImportError(MISSING_PROTOBUF) from None
    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    schema = descriptor_pb2.FileDescriptorProto(name="bert_data/example.proto", package=_PACKAGE, syntax="proto3")

    def message(name, *fields, parent=None):
        proto = (parent.nested_type if parent is not None else schema.message_type).add(name=name)
        for number, field_name, field_type, label, type_name in fields:
            proto.field.add(name=field_name, number=number, type=field_type, label=label,
                            type_name=f".{_PACKAGE}.{type_name}" if type_name else None)
        return proto

    message("BytesList", (1, "value", field.TYPE_BYTES, repeated, None))
    message("FloatList", (1, "value", field.TYPE_FLOAT, repeated, None))
    message("Int64List", (1, "value", field.TYPE_INT64, repeated, None))
    feature = message("Feature", *[(number, name, field.TYPE_MESSAGE, optional, name.title().replace("_", ""))
                                   for number, name in KIND_NAMES.items()])
    feature.oneof_decl.add(name="kind")
    for member in feature.field:
        member.oneof_index = 0
    features = message("Features", (1, "feature", field.TYPE_MESSAGE, repeated, "Features.FeatureEntry"))
    entry = message("FeatureEntry", (1, "key", field.TYPE_STRING, optional, None),
                    (2, "value", field.TYPE_MESSAGE, optional, "Feature"), parent=features)
    entry.options.map_entry = True
    message("Example", (1, "features", field.TYPE_MESSAGE, optional, "Features"))

    pool = descriptor_pool.DescriptorPool()  # private: never clashes with TensorFlow's tensorflow.Example
    pool.Add(schema)
    descriptor = pool.FindMessageTypeByName(f"{_PACKAGE}.Example")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # protobuf < 4.22


def parse_example(data: bytes) -> Dict[str, Tuple[int, object]]:
    """``{name: (kind, values)}`` of serialized Example bytes, as protobuf reads them (a wire type
    that does not match a known field makes it an unknown field, skipped; the last occurrence of
    a feature wins).  ``kind`` is a ``Feature`` field number, 0 when no list is set (values
    ``[]``); ``values`` is the list's repeated field.  Raises ``ValueError`` for malformed bytes."""
    from google.protobuf.message import DecodeError

    example = example_class()()
    try:
        example.ParseFromString(data)
    except DecodeError as error:
        reason = str(error).rsplit(": ", 1)[-1]
        raise ValueError(f"malformed Example (protobuf: {reason})") from None
    out = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        out[name] = (0, []) if kind is None else (_KIND_NUMBERS[kind], getattr(feature, kind).value)
    return out


_KIND_NUMBERS = {name: number for number, name in KIND_NAMES.items()}
