#!/usr/bin/env python3
"""Decode collsched's Chakra traces with the real consumer's decoder (PyPI `mlc-chakra`).

Usage: chakra_decode.py DIR PREFIX TOTAL_BYTES [RANKS]

Reads every DIR/PREFIX.<rank>.et (ranks 0, 1, ... until a file is missing, or exactly RANKS
files when given), decodes the GlobalMetadata and the Nodes with mlc-chakra, and checks that:
  - every file is read to its end (the decoder stops silently on a truncated stream),
  - every node id is unique and its data_deps name nodes of the same file,
  - every COMM_SEND_NODE pairs with a COMM_RECV_NODE on (tag, src, dst, size), first in first
    out, and no message is left unpaired,
  - the comm_size of all sends adds up to TOTAL_BYTES.
Exits 0 when all hold, 1 otherwise (2 on bad usage).
"""

import os
import sys
from collections import Counter

from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, GlobalMetadata, Node
from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd


def attrs(node):
    """Attribute name -> value (whatever member of the oneof is set)."""
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        out[a.name] = getattr(a, kind) if kind else None
    return out


def read_trace(path):
    size = os.path.getsize(path)
    fh = openFileRd(path)
    meta = GlobalMetadata()
    if not decodeMessage(fh, meta):
        raise ValueError(f"{path}: no GlobalMetadata")
    nodes = []
    while True:
        node = Node()
        if not decodeMessage(fh, node):
            break
        nodes.append(node)
    if fh.tell() != size:
        raise ValueError(f"{path}: decoding stopped at byte {fh.tell()} of {size}")
    fh.close()
    return meta, nodes


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    folder, prefix, expected = argv[1], argv[2], int(argv[3])
    ranks = int(argv[4]) if len(argv) == 5 else None
    errors = []
    sends, recvs = Counter(), Counter()
    total = 0
    counts = Counter()
    rank = 0
    while ranks is None or rank < ranks:
        path = os.path.join(folder, f"{prefix}.{rank}.et")
        if not os.path.exists(path):
            if ranks is not None or rank == 0:
                errors.append(f"{path}: missing")
            break
        try:
            meta, nodes = read_trace(path)
        except Exception as e:  # noqa: BLE001 - any decoding failure is a finding
            errors.append(f"{path}: {e}")
            rank += 1
            continue
        if not meta.version:
            errors.append(f"{path}: GlobalMetadata.version is empty")
        ids = [n.id for n in nodes]
        if len(set(ids)) != len(ids):
            errors.append(f"{path}: duplicate node ids")
        known = set(ids)
        for n in nodes:
            a = attrs(n)
            missing = [d for d in n.data_deps if d not in known]
            if missing:
                errors.append(f"{path}: node {n.id} depends on unknown nodes {missing}")
            try:
                if n.type == COMM_SEND_NODE:
                    key = (a["comm_tag"], rank, a["comm_dst"], a["comm_size"])
                    sends[key] += 1
                    total += a["comm_size"]
                    counts["send"] += 1
                elif n.type == COMM_RECV_NODE:
                    recvs[(a["comm_tag"], a["comm_src"], rank, a["comm_size"])] += 1
                    counts["recv"] += 1
                elif n.type == COMP_NODE:
                    counts["comp"] += 1
                else:
                    errors.append(f"{path}: node {n.id} has unexpected type {n.type}")
            except KeyError as e:
                errors.append(f"{path}: node {n.id} ({n.name}) lacks attribute {e}")
        rank += 1
    for key in sorted(set(sends) | set(recvs)):
        if sends[key] != recvs[key]:
            tag, src, dst, size = key
            errors.append(f"tag {tag} {src} -> {dst} size {size}: {sends[key]} sends, {recvs[key]} receives")
    if total != expected:
        errors.append(f"total bytes sent {total}, expected {expected}")
    for e in errors[:20]:
        print("error:", e, file=sys.stderr)
    if errors:
        print(f"FAILED: {len(errors)} problems", file=sys.stderr)
        return 1
    print(f"ok: {rank} ranks, {counts['send']} sends, {counts['recv']} receives, {counts['comp']} reductions, {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
