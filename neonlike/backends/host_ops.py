"""neon's backend utilities that run on the host, shared by every device: timing marks and
non-maximum suppression.

    tic, toc = be.init_mark(), be.init_mark()
    be.record_mark(tic); keep = be.nms(dets, 0.7); be.record_mark(toc)
    be.synchronize_mark(toc); be.get_time(tic, toc)     # milliseconds

A device whose work runs asynchronously overrides the marks (the GPU: CUDA events).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np


class HostOpsMixin:
    # ---------------------------------------------------------------- timing marks
    def init_mark(self) -> dict:
        """A timing mark (record it with record_mark)."""
        return {"time": 0.0}

    def record_mark(self, marker: dict) -> None:
        marker["time"] = time.perf_counter()

    def synchronize_mark(self, marker: dict) -> None:
        """Wait for the work before the mark (nothing to wait for: host work is synchronous)."""

    def get_time(self, start: dict, end: dict) -> float:
        """Milliseconds between two recorded marks."""
        return (end["time"] - start["time"]) * 1000.0

    # ---------------------------------------------------------------- detection
    def nms(self, detections: Any, threshold: float, normalized: bool = False) -> list:
        """Greedy non-maximum suppression of boxes (count, 5): rows (x1, y1, x2, y2, score);
        rows of score 0 are ignored. Going down the scores, a box is kept unless it overlaps a
        kept box by more than `threshold` (intersection over union). Boxes in pixels measure
        x2 - x1 + 1 (normalized: x2 - x1). Returns the kept boxes' positions among the
        non-zero-score rows, best first (neon's)."""
        dets = detections.get() if hasattr(detections, "get") else np.asarray(detections)
        if dets.ndim != 2 or dets.shape[1] != 5:
            raise ValueError(f"nms: detections must be (count, 5) rows (x1, y1, x2, y2, score), "
                             f"got shape {dets.shape}")
        offset = 0.0 if normalized else 1.0
        boxes = dets[dets[:, 4] != 0].astype(np.float64)
        x1, y1, x2, y2, scores = boxes.T
        areas = (x2 - x1 + offset) * (y2 - y1 + offset)
        order = np.argsort(scores, kind="stable")[::-1]
        keep = []
        while order.size:
            i, rest = order[0], order[1:]
            keep.append(int(i))
            w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + offset)
            h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + offset)
            inter = w * h
            order = rest[inter / (areas[i] + areas[rest] - inter) <= threshold]
        return keep
