"""Scenes for the event-camera simulator: procedural textures and the geometry rays hit.

Two kinds of scene, both defined in the world frame (z up) and both storing
**log intensity** ``log(intensity + LOG_OFFSET)`` (intensity in [0, 1]), sampled bilinearly:

- :class:`PanoramaScene`: a scene at infinity (pure rotation), a cube map: six
  square textures on the faces of a cube centred on the camera, like a room whose
  walls are infinitely far away. A viewing direction picks the face of its largest
  component; the face corners are the room's edges.
- :class:`PlanarScene`: textured rectangles at known positions (a back wall with
  panels in front), ray-cast per pixel for the 6-DoF simulator; gives depth too.

Textures are generated deterministically from a seed (:func:`procedural_texture`):
boxes, blobs and lines of several sizes and contrasts on a smooth background,
anti-aliased (drawn at twice the resolution, then area-averaged and slightly blurred)
so that sampling them does not flicker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
from numba import njit

#: offset added to the intensity (in [0, 1]) before taking the log, so black is finite
LOG_OFFSET = 0.03


def procedural_texture(height: int, width: int, rng: np.random.Generator,
                       shapes_per_megapixel: float = 120.0, smallest_px: float = 4.0,
                       largest_px: float = 120.0, texel_scale: float = 1.0) -> np.ndarray:
    """A texture of intensity in [0, 1]: boxes, blobs and lines, float32.

    Shape sizes (texels) are log-uniform between ``smallest_px`` and ``largest_px``,
    intensities uniform in [0.02, 1]; ``shapes_per_megapixel`` sets the edge density
    and therefore the event rate. Deterministic for a given ``rng`` state.
    ``texel_scale`` (>= 1) draws the same shapes on a grid that many times finer: the
    result is (round(height · texel_scale), round(width · texel_scale)) with sharper edges
    (the anti-aliasing and blur act per texel), for cameras whose pixels are finer than
    the DAVIS240C's; sizes, counts and positions above are in texels of the 1x grid.
    """
    scale = 2  # draw at twice the resolution, then area-average: anti-aliased edges
    out_h, out_w = int(round(height * texel_scale)), int(round(width * texel_scale))
    canvas_h, canvas_w = out_h * scale, out_w * scale
    # canvas px per 1x-grid canvas px (1 exactly at texel_scale 1)
    draw_scale = canvas_w / (width * scale)
    background = rng.uniform(0.25, 0.6)
    gradient = cv2.resize(rng.uniform(-0.15, 0.15, (4, 4)).astype(np.float32), (canvas_w, canvas_h),
                          interpolation=cv2.INTER_CUBIC)
    canvas = np.full((canvas_h, canvas_w), background, np.float32) + gradient
    count = max(1, int(round(shapes_per_megapixel * height * width / 1e6)))
    for _ in range(count):
        size = scale * float(np.exp(rng.uniform(np.log(smallest_px), np.log(largest_px))))
        centre = (rng.uniform(0, width * scale) * draw_scale, rng.uniform(0, height * scale) * draw_scale)
        value = float(rng.uniform(0.02, 1.0))
        kind = rng.integers(0, 3)
        if kind == 0:  # box, possibly rotated
            box = ((centre[0], centre[1]), (size * draw_scale, size * rng.uniform(0.3, 1.0) * draw_scale),
                   rng.uniform(0, 180))
            cv2.fillPoly(canvas, [np.round(cv2.boxPoints(box) * 16).astype(np.int32)], value,
                         lineType=cv2.LINE_8, shift=4)
        elif kind == 1:  # blob (ellipse)
            axes = (max(1, int(size / 2 * draw_scale)), max(1, int(size / 2 * rng.uniform(0.4, 1.0) * draw_scale)))
            cv2.ellipse(canvas, (int(centre[0]), int(centre[1])), axes, rng.uniform(0, 180), 0, 360,
                        value, thickness=-1)
        else:  # line
            angle = rng.uniform(0, np.pi)
            half = size * draw_scale * np.array([np.cos(angle), np.sin(angle)])
            start = np.round(np.array(centre) - half).astype(int)
            end = np.round(np.array(centre) + half).astype(int)
            thickness = max(1, int(rng.uniform(1, max(2, size / 12)) * draw_scale))
            cv2.line(canvas, tuple(int(v) for v in start), tuple(int(v) for v in end), value, thickness)
    texture = cv2.resize(canvas, (out_w, out_h), interpolation=cv2.INTER_AREA)
    texture = cv2.GaussianBlur(texture, (0, 0), 0.6)
    return np.clip(texture, 0.0, 1.0).astype(np.float32)


def log_intensity(intensity: np.ndarray) -> np.ndarray:
    """log(intensity + LOG_OFFSET) as float32 (intensity in [0, 1])."""
    return np.log(intensity.astype(np.float32) + np.float32(LOG_OFFSET)).astype(np.float32)


# ----------------------------------------------------------------------------- panorama


@dataclass(frozen=True)
class PanoramaScene:
    """A textured scene at infinity: a cube map of log intensity, faces (6, size, size) float32.

    Face order +x, -x, +y, -y, +z, -z (world frame). On face with major axis a, the
    texture coordinates are the two other components divided by |d_a| (in [-1, 1]).
    """

    faces: np.ndarray

    @classmethod
    def generate(cls, seed: int, face_size: int = 512, shapes_per_megapixel: float = 120.0,
                 texel_scale: float = 1.0) -> "PanoramaScene":
        """A deterministic room of six procedurally textured walls (0.18 deg per texel at 512).

        texel_scale (>= 1): the same room on faces of round(face_size · texel_scale) texels
        (see :func:`procedural_texture`), for cameras with finer pixels.
        """
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5CE4E]))
        faces = np.stack([log_intensity(procedural_texture(face_size, face_size, rng, shapes_per_megapixel,
                                                           texel_scale=texel_scale))
                          for _ in range(6)])
        return cls(np.ascontiguousarray(faces))

    def log_intensity(self, directions: np.ndarray) -> np.ndarray:
        """Log intensity seen along world directions (..., 3) (any length, not necessarily unit)."""
        flat = np.ascontiguousarray(directions.reshape(-1, 3), dtype=np.float64)
        out = np.empty(len(flat), np.float32)
        for i in range(len(flat)):
            out[i] = sample_cube_map(self.faces, flat[i, 0], flat[i, 1], flat[i, 2])
        return out.reshape(directions.shape[:-1])


@njit(cache=True, nogil=True)
def sample_bilinear(texture, row, col):
    """Bilinear sample of a 2-D texture at fractional (row, col) texel coordinates, edges clamped."""
    height, width = texture.shape
    row = min(max(row, 0.0), height - 1.000001)
    col = min(max(col, 0.0), width - 1.000001)
    r0 = int(row)
    c0 = int(col)
    fr = row - r0
    fc = col - c0
    top = texture[r0, c0] * (1.0 - fc) + texture[r0, c0 + 1] * fc
    bottom = texture[r0 + 1, c0] * (1.0 - fc) + texture[r0 + 1, c0 + 1] * fc
    return top * (1.0 - fr) + bottom * fr


@njit(cache=True, nogil=True)
def sample_cube_map(faces, dx, dy, dz):
    """Log intensity of the cube map along the world direction (dx, dy, dz)."""
    ax, ay, az = abs(dx), abs(dy), abs(dz)
    if ax >= ay and ax >= az:
        face = 0 if dx > 0 else 1
        u, v = dy / ax, dz / ax
    elif ay >= az:
        face = 2 if dy > 0 else 3
        u, v = dx / ay, dz / ay
    else:
        face = 4 if dz > 0 else 5
        u, v = dx / az, dy / az
    size = faces.shape[1]
    col = (u + 1.0) * 0.5 * size - 0.5
    row = (v + 1.0) * 0.5 * size - 0.5
    return sample_bilinear(faces[face], row, col)


# ----------------------------------------------------------------------------- planes


@dataclass(frozen=True)
class TexturedPlane:
    """A textured rectangle in the world frame (m).

    origin: centre (3,); axis_u, axis_v: orthonormal in-plane directions (3,);
    half_size: (half extent along u, along v) in m, ``inf`` for an unbounded plane
    (its texture then repeats); texels_per_metre: texture resolution;
    texture: (rows, cols) float32 log intensity, row along v, column along u.
    """

    origin: np.ndarray
    axis_u: np.ndarray
    axis_v: np.ndarray
    half_size: tuple
    texels_per_metre: float
    texture: np.ndarray

    @property
    def normal(self) -> np.ndarray:
        return np.cross(self.axis_u, self.axis_v)


@dataclass(frozen=True)
class PlanarScene:
    """Textured planes, packed into flat arrays for the ray caster.

    geometry: (P, 14) float64 rows ``origin(3) axis_u(3) axis_v(3) normal(3) half_u half_v``;
    textures: (P, R, C) float32 log intensity (all the same size); texels_per_metre: (P,).
    The ray caster takes the nearest plane hit in front of the camera.
    """

    planes: tuple
    geometry: np.ndarray
    textures: np.ndarray
    texels_per_metre: np.ndarray

    @classmethod
    def from_planes(cls, planes) -> "PlanarScene":
        planes = tuple(planes)
        shapes = {p.texture.shape for p in planes}
        if len(shapes) != 1:
            raise ValueError(f"all plane textures must have the same size, got {sorted(shapes)}")
        geometry = np.array([np.concatenate([p.origin, p.axis_u, p.axis_v, p.normal, p.half_size])
                             for p in planes], np.float64)
        return cls(planes, geometry, np.ascontiguousarray(np.stack([p.texture for p in planes])),
                   np.array([p.texels_per_metre for p in planes], np.float64))

    @classmethod
    def boxes_in_front_of_wall(cls, seed: int, wall_distance_m: float = 4.0,
                               texture_size: int = 512, texel_scale: float = 1.0) -> "PlanarScene":
        """A wall at x = wall_distance_m (unbounded, facing -x), three panels in front.

        Panels: fronto-parallel at x = 1.6, 2.4 m and one slanted by 40 deg about the
        vertical at about 3.0 m, each about 1 m wide. The camera of the 6-DoF preset
        sits near the origin looking along +x.
        """
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x91A4E]))
        resolution = int(round(texture_size * texel_scale))  # texels per texture side

        def texture():
            return log_intensity(procedural_texture(texture_size, texture_size, rng, 90.0, texel_scale=texel_scale))

        y_axis, z_axis = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
        # facing -x (towards the camera): u = +y ... choose u, v so that normal = u x v = -x
        u_front, v_front = -y_axis, z_axis  # (-y) x z = -x
        planes = [TexturedPlane(np.array([wall_distance_m, 0.0, 0.0]), u_front, v_front,
                                (np.inf, np.inf), resolution / 3.0, texture()),
                  TexturedPlane(np.array([1.6, 0.45, -0.2]), u_front, v_front, (0.35, 0.3),
                                resolution / 0.7, texture()),
                  TexturedPlane(np.array([2.4, -0.6, 0.25]), u_front, v_front, (0.5, 0.4),
                                resolution / 1.0, texture())]
        angle = np.deg2rad(40.0)
        slanted_u = np.array([np.sin(angle), -np.cos(angle), 0.0])  # rotated -y about z
        planes.append(TexturedPlane(np.array([3.0, 1.4, 0.1]), slanted_u, z_axis, (0.5, 0.5),
                                    resolution / 1.0, texture()))
        return cls.from_planes(planes)

    @classmethod
    def slider(cls, seed: int, wall_distance_m: float = 2.3, texture_size: int = 512,
               texel_scale: float = 1.0) -> "PlanarScene":
        """Like the dataset's slider_depth: textured boxes on a table at 0.55-2.0 m, a wall behind.

        All surfaces face the camera of the ``slider`` preset (at the origin, looking along
        world +x, sliding along world -y): a wall at x = ``wall_distance_m`` (unbounded,
        facing -x), five fronto-parallel panels at x = 0.55, 0.8, 1.1, 1.5 and 2.0 m and one
        panel slanted by 35 deg about the vertical between about 1.2 and 1.6 m, so depths
        seen by the camera lie in [0.55, 2.3] m (inside the paper's 0.45-2.4 m range). Each
        surface's texture has about 2 texels per pixel footprint at its depth (DAVIS240C,
        f ≈ 200 px), so edges are sharp but not aliased.
        """
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x511DE4]))
        resolution = int(round(texture_size * texel_scale))  # texels per texture side

        def texture():  # dense, mostly small shapes: many edges, as on slider_depth's objects
            return log_intensity(procedural_texture(texture_size, texture_size, rng, 2500.0, largest_px=40.0,
                                                    texel_scale=texel_scale))

        def texels_per_metre(depth_m):  # ~2 texels per pixel footprint (depth / 200 px) at texel_scale 1
            return 400.0 * resolution / texture_size / depth_m

        y_axis, z_axis = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
        u_front, v_front = -y_axis, z_axis  # normal u x v = -x: facing the camera
        planes = [TexturedPlane(np.array([wall_distance_m, 0.0, 0.0]), u_front, v_front, (np.inf, np.inf),
                                texels_per_metre(wall_distance_m), texture())]
        # (depth x, centre y, centre z, half width, half height), m
        for x, y, z, half_u, half_v in ((0.55, 0.12, -0.13, 0.11, 0.08), (0.8, -0.22, 0.1, 0.14, 0.12),
                                        (1.1, 0.32, 0.16, 0.2, 0.15), (1.5, -0.02, -0.26, 0.3, 0.18),
                                        (2.0, 0.55, 0.32, 0.35, 0.25)):
            planes.append(TexturedPlane(np.array([x, y, z]), u_front, v_front, (half_u, half_v),
                                        texels_per_metre(x), texture()))
        angle = np.deg2rad(35.0)
        slanted_u = np.array([np.sin(angle), -np.cos(angle), 0.0])  # -y rotated about z: depth grows with u
        planes.append(TexturedPlane(np.array([1.4, -0.55, 0.12]), slanted_u, z_axis, (0.3, 0.2),
                                    texels_per_metre(1.4), texture()))
        return cls.from_planes(planes)

    @classmethod
    def random_panels(cls, seed: int, near_m: float, far_m: float, panels: int = 6, max_tilt_deg: float = 20.0,
                      wall_m: float | None = None, shapes_per_megapixel: float = 2500.0, spread: float = 0.8,
                      texture_size: int = 512, texel_scale: float = 1.0) -> "PlanarScene":
        """Textured panels at depths log-uniform in [near_m, far_m] (m, along world +x, where the
        scenes' cameras look), spread across a 30-degree half-angle cone (``spread``: the share of
        it used), each about a third of the cone's width at its depth, tilted up to
        ``max_tilt_deg`` about the vertical and the horizontal; panels overlap in view, so nearer
        ones occlude farther ones. ``wall_m``: an unbounded textured wall at that depth behind
        them (None: nothing, the rays that miss see black). ``shapes_per_megapixel`` sets the
        texture's edge density (hence the event rate); ~2 texels per DAVIS240C pixel footprint at
        each surface's depth, as :meth:`slider`.
        """
        if not 0 < near_m <= far_m:
            raise ValueError(f"panels need 0 < near_m <= far_m, got {near_m}, {far_m}")
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x9A4E15]))
        resolution = int(round(texture_size * texel_scale))

        def texture():
            return log_intensity(procedural_texture(texture_size, texture_size, rng, shapes_per_megapixel,
                                                    largest_px=40.0, texel_scale=texel_scale))

        def texels_per_metre(depth_m):
            return 400.0 * resolution / texture_size / depth_m

        y_axis, z_axis = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0])
        u_front, v_front = -y_axis, z_axis  # normal u x v = -x: facing the cameras
        planes = []
        if wall_m is not None:
            planes.append(TexturedPlane(np.array([wall_m, 0.0, 0.0]), u_front, v_front, (np.inf, np.inf),
                                        texels_per_metre(wall_m), texture()))
        half_cone = np.tan(np.deg2rad(30.0))
        for depth in np.exp(rng.uniform(np.log(near_m), np.log(far_m), panels)):
            centre = np.array([depth, *(spread * half_cone * depth * rng.uniform(-1.0, 1.0, 2) * (1.0, 0.75))])
            half_size = (half_cone * depth * rng.uniform(0.25, 0.45), half_cone * depth * rng.uniform(0.2, 0.35))
            yaw, pitch = np.deg2rad(rng.uniform(-max_tilt_deg, max_tilt_deg, 2))
            turn = np.array([[np.cos(yaw), -np.sin(yaw), 0.0], [np.sin(yaw), np.cos(yaw), 0.0], [0.0, 0.0, 1.0]]) @ \
                np.array([[np.cos(pitch), 0.0, np.sin(pitch)], [0.0, 1.0, 0.0], [-np.sin(pitch), 0.0, np.cos(pitch)]])
            planes.append(TexturedPlane(centre, turn @ u_front, turn @ v_front, half_size, texels_per_metre(depth),
                                        texture()))
        return cls.from_planes(planes)


@njit(cache=True, nogil=True)
def cast_ray(geometry, textures, texels_per_metre, ox, oy, oz, dx, dy, dz):
    """(log intensity, ray parameter s) of the nearest plane hit by origin + s * direction.

    s > 0 is in units of the direction's length; s = inf and the log intensity of black
    when nothing is hit. Only the nearest plane's texture is sampled.
    """
    best_s = np.inf
    best_plane = -1
    best_row = best_col = 0.0
    rows, cols = textures.shape[1], textures.shape[2]
    for k in range(geometry.shape[0]):
        nx, ny, nz = geometry[k, 9], geometry[k, 10], geometry[k, 11]
        denominator = nx * dx + ny * dy + nz * dz
        if abs(denominator) < 1e-12:
            continue
        s = (nx * (geometry[k, 0] - ox) + ny * (geometry[k, 1] - oy) + nz * (geometry[k, 2] - oz)) / denominator
        if s <= 1e-9 or s >= best_s:
            continue
        hx = ox + s * dx - geometry[k, 0]
        hy = oy + s * dy - geometry[k, 1]
        hz = oz + s * dz - geometry[k, 2]
        u = hx * geometry[k, 3] + hy * geometry[k, 4] + hz * geometry[k, 5]
        v = hx * geometry[k, 6] + hy * geometry[k, 7] + hz * geometry[k, 8]
        if abs(u) > geometry[k, 12] or abs(v) > geometry[k, 13]:
            continue
        best_s = s
        best_plane = k
        best_col = u * texels_per_metre[k] + 0.5 * cols - 0.5
        best_row = v * texels_per_metre[k] + 0.5 * rows - 0.5
    if best_plane < 0:
        return math.log(LOG_OFFSET), best_s
    if geometry[best_plane, 12] == np.inf:  # unbounded plane: the texture repeats
        best_col -= (cols - 1) * math.floor(best_col / (cols - 1))
    if geometry[best_plane, 13] == np.inf:
        best_row -= (rows - 1) * math.floor(best_row / (rows - 1))
    return sample_bilinear(textures[best_plane], best_row, best_col), best_s
