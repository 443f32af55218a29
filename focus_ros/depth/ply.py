"""Point clouds as PLY files (binary little-endian), readable by MeshLab, CloudCompare, Open3D.

Vertex properties: ``float x, y, z`` (m, world frame), ``float confidence`` (the focus
score at the depth peak), optionally ``float depth_sigma`` (m, the depth's standard deviation)
and ``uchar red, green, blue`` (depth colours).
:func:`write_ply` writes one cloud; :class:`PlyAppender` streams many clouds into one
file without holding them in memory (the header's vertex count is written last);
:func:`read_ply` reads these files back (and ASCII PLYs with float/uchar vertex properties).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

_TYPES = {"float": "<f4", "float32": "<f4", "double": "<f8", "float64": "<f8", "uchar": "u1", "uint8": "u1",
          "int": "<i4", "int32": "<i4", "uint": "<u4", "uint32": "<u4", "short": "<i2", "ushort": "<u2",
          "char": "i1", "int8": "i1"}


def _vertex_dtype(with_colors: bool, with_sigma: bool = False) -> np.dtype:
    fields = [("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("confidence", "<f4")]
    if with_sigma:
        fields.append(("depth_sigma", "<f4"))
    if with_colors:
        fields += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
    return np.dtype(fields)


def _header(count: int, with_colors: bool, with_sigma: bool = False) -> bytes:
    lines = ["ply", "format binary_little_endian 1.0", "comment focus_ros semi-dense depth (m, world frame)"]
    if with_sigma:
        lines.append("comment depth_sigma: standard deviation of the depth along the camera's optical axis (m)")
    lines += [f"element vertex {count}", "property float x", "property float y", "property float z",
              "property float confidence"]
    if with_sigma:
        lines.append("property float depth_sigma")
    if with_colors:
        lines += ["property uchar red", "property uchar green", "property uchar blue"]
    lines.append("end_header")
    return ("\n".join(lines) + "\n").encode("ascii")


def _vertices(points, confidence, colors, sigma_m=None) -> np.ndarray:
    points = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    confidence = np.zeros(len(points), np.float32) if confidence is None else np.asarray(confidence, np.float32)
    if confidence.shape != (len(points),):
        raise ValueError(f"confidence has shape {confidence.shape}, expected ({len(points)},)")
    vertices = np.empty(len(points), _vertex_dtype(colors is not None, sigma_m is not None))
    vertices["x"], vertices["y"], vertices["z"] = points[:, 0], points[:, 1], points[:, 2]
    vertices["confidence"] = confidence
    if sigma_m is not None:
        sigma_m = np.asarray(sigma_m, np.float32)
        if sigma_m.shape != (len(points),):
            raise ValueError(f"depth sigma has shape {sigma_m.shape}, expected ({len(points)},)")
        vertices["depth_sigma"] = sigma_m
    if colors is not None:
        colors = np.asarray(colors, dtype=np.uint8).reshape(-1, 3)
        if len(colors) != len(points):
            raise ValueError(f"{len(colors)} colours for {len(points)} points")
        vertices["red"], vertices["green"], vertices["blue"] = colors[:, 0], colors[:, 1], colors[:, 2]
    return vertices


def write_ply(path, points, confidence=None, colors=None, sigma_m=None) -> None:
    """Write points (M, 3) m, confidence (M,), optional colours (M, 3) uint8 RGB and optional
    depth standard deviations sigma_m (M,) m (the ``depth_sigma`` property)."""
    vertices = _vertices(points, confidence, colors, sigma_m)
    with open(path, "wb") as stream:
        stream.write(_header(len(vertices), colors is not None, sigma_m is not None))
        stream.write(vertices.tobytes())


class PlyAppender:
    """One PLY file built from many clouds (all with colours or all without, all with depth
    sigmas or all without): vertices go to a temporary file beside ``path``; :meth:`close` writes
    header + vertices to ``path``."""

    def __init__(self, path, with_colors: bool = True, with_sigma: bool = False):
        self.path = Path(path)
        self.with_colors = with_colors
        self.with_sigma = with_sigma
        self.count = 0
        handle, self._body_path = tempfile.mkstemp(prefix=".points-", dir=self.path.parent)
        self._body = os.fdopen(handle, "wb")

    def append(self, points, confidence=None, colors=None, sigma_m=None) -> None:
        if (colors is not None) != self.with_colors:
            raise ValueError("PlyAppender: colours must be given for every cloud or for none")
        if (sigma_m is not None) != self.with_sigma:
            raise ValueError("PlyAppender: depth sigmas must be given for every cloud or for none")
        vertices = _vertices(points, confidence, colors, sigma_m)
        self._body.write(vertices.tobytes())
        self.count += len(vertices)

    def close(self) -> None:
        if self._body.closed:
            return
        self._body.close()
        with open(self.path, "wb") as out, open(self._body_path, "rb") as body:
            out.write(_header(self.count, self.with_colors, self.with_sigma))
            shutil.copyfileobj(body, out, 1 << 20)
        os.unlink(self._body_path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            self._body.close()
            os.unlink(self._body_path)


def read_ply(path) -> dict:
    """The vertices of a PLY file as {property name: array}; ValueError naming the file
    for anything but a vertex-only binary-little-endian or ASCII PLY."""
    path = Path(path)
    with open(path, "rb") as stream:
        if stream.readline().strip() != b"ply":
            raise ValueError(f"{path}: not a PLY file")
        fmt, count, fields, element = None, 0, [], None
        while True:
            line = stream.readline()
            if not line:
                raise ValueError(f"{path}: PLY header has no end_header")
            words = line.decode("ascii", "replace").split()
            if not words or words[0] in ("comment", "obj_info"):
                continue
            if words[0] == "end_header":
                break
            if words[0] == "format":
                fmt = words[1]
            elif words[0] == "element":
                element = words[1]
                if element == "vertex":
                    count = int(words[2])
                elif int(words[2]) > 0:
                    raise ValueError(f"{path}: PLY element {element!r} is not supported (vertices only)")
            elif words[0] == "property" and element == "vertex":
                if words[1] == "list" or words[1] not in _TYPES:
                    raise ValueError(f"{path}: PLY property type {words[1]!r} is not supported")
                fields.append((words[2], _TYPES[words[1]]))
        dtype = np.dtype(fields)
        if fmt == "binary_little_endian":
            raw = stream.read(count * dtype.itemsize)
            data = np.frombuffer(raw[:len(raw) - len(raw) % dtype.itemsize], dtype=dtype)
            if len(data) != count:
                raise ValueError(f"{path}: PLY holds {len(data)} of its {count} vertices")
        elif fmt == "ascii":
            table = np.loadtxt(stream, ndmin=2, max_rows=count) if count else np.empty((0, len(fields)))
            if len(table) != count:
                raise ValueError(f"{path}: PLY holds {len(table)} of its {count} vertices")
            data = np.empty(count, dtype)
            for column, (name, _) in enumerate(fields):
                data[name] = table[:, column]
        else:
            raise ValueError(f"{path}: PLY format {fmt!r} is not supported")
    return {name: np.array(data[name]) for name in dtype.names}
