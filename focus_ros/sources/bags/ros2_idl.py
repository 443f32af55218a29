"""The message definitions a ROS 2 bag stores, made readable by rosbags.

rosbag2 stores with each topic the complete definition of its type (the MCAP schema, or the
sqlite3 ``message_definitions`` table): as ``.msg`` text (encoding ``ros2msg``) when it finds
the ``.msg`` files, else as ROS 2 IDL (``ros2idl``), the ``.idl`` files that
``rosidl_adapter`` generates from the ``.msg`` files (``msg.idl.em``). In that form every
definition is preceded by a line of 80 ``=`` and a line ``IDL: package/msg/Name``, and each
one names the definitions it uses in preprocessor lines ``#include "package/msg/Name.idl"``.
rosbags (0.11) parses the IDL but not the ``#include`` lines, so it refused every such bag
("Could not parse: '// generated from rosidl_adapter/resource/msg.idl.em ..."). The included
definitions are stored in the same text, after their own delimiters, so the lines carry
nothing the parser needs: :func:`readable_definition` removes them and keeps everything else
as the bag stores it; rosbags then checks the parsed types against the type hashes the bag
records, as for any bag.
"""

from __future__ import annotations

import re

from rosbags.interfaces import MessageDefinition, MessageDefinitionFormat
from rosbags.rosbag2 import Reader as Ros2Reader

__all__ = ["Ros2BagReader", "readable_definition"]

#: an IDL preprocessor include line, as rosidl_adapter writes them (``#include "pkg/msg/Name.idl"``)
_IDL_INCLUDE_LINE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*["<][^">\n]*[">][ \t]*\r?\n?', re.MULTILINE)


def readable_definition(definition: MessageDefinition) -> MessageDefinition:
    """The stored definition of one type as rosbags' parser reads it: ROS 2 IDL without its
    ``#include`` lines (the definitions they name follow in the same text); any other
    definition unchanged."""
    if definition.format != MessageDefinitionFormat.IDL or "#" not in definition.data:
        return definition
    return MessageDefinition(definition.format, _IDL_INCLUDE_LINE.sub("", definition.data))


class Ros2BagReader(Ros2Reader):
    """rosbags' ROS 2 bag reader whose connections carry :func:`readable_definition`'s
    definitions (rosbags' AnyReader builds its types from them when it opens the bag)."""

    def open(self) -> None:
        super().open()
        # the storage's own list: what ``connections`` returns and ``messages`` yields
        self.storage.connections = [connection._replace(msgdef=readable_definition(connection.msgdef))
                                    for connection in self.storage.connections]

