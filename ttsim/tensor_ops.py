"""The Python operators ttnn 0.81.1 attaches to ttnn.Tensor in its ``__init__`` (+, -, *, /,
comparisons, @ and [] indexing), attached the same way and routed to the same ops."""

from __future__ import annotations

from .ops import shape as _shape
from .ops.eltwise import add, divide, eq, ge, gt, le, lt, multiply, ne, rdiv, subtract
from .ops.matmul import matmul
from .tensor import Tensor
from .types import TTFatal


def getitem(input_tensor: Tensor, slices) -> Tensor:
    """torch-style indexing (ints, slices, one Ellipsis) through ttnn.slice; int-indexed dims
    are dropped. Host tensors take unit steps only (as ttnn)."""
    shape = list(input_tensor.shape)
    rank = len(shape)
    items = list(slices) if isinstance(slices, tuple) else [slices]
    if items.count(Ellipsis) > 1:
        raise TTFatal("Tensor[...]: only one ellipsis ('...') is allowed in a slice")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (rank - (len(items) - 1))
    items += [slice(None)] * (rank - len(items))
    if len(items) > rank:
        raise TTFatal(f"Tensor[...]: too many indices for a tensor of rank {rank}")
    starts, ends, steps, dropped = [], [], [], []
    for d, s in enumerate(items):
        if isinstance(s, int) and not isinstance(s, bool):
            idx = s + shape[d] if s < 0 else s
            if not 0 <= idx < shape[d]:
                raise TTFatal(f"Tensor[...]: index {s} is out of bounds for dim {d} of size {shape[d]}")
            starts.append(idx), ends.append(idx + 1), steps.append(1), dropped.append(d)
        elif isinstance(s, slice):
            starts.append(0 if s.start is None else s.start)
            ends.append(shape[d] if s.stop is None else s.stop)
            steps.append(1 if s.step is None else s.step)
        else:
            raise TTFatal(f"Tensor[...]: invalid index {s!r} for dim {d}")
    if input_tensor._device is None and any(st != 1 for st in steps):
        raise TTFatal("Tensor[...]: host tensors cannot be accessed with non-unit stride")
    out = _shape.slice(input_tensor, starts, ends, steps)
    if dropped:
        out = _shape.reshape(out, [n for d, n in enumerate(out.shape) if d not in dropped])
    return out


# Assigned after the class body, as ttnn does, so Tensor stays hashable.
Tensor.__add__ = lambda self, *args, **kwargs: add(self, *args, **kwargs)
Tensor.__radd__ = lambda self, *args, **kwargs: add(self, *args, **kwargs)
Tensor.__sub__ = lambda self, *args, **kwargs: subtract(self, *args, **kwargs)
Tensor.__rsub__ = lambda self, other, *args, **kwargs: subtract(self, other, *args, **kwargs) * -1.0
Tensor.__mul__ = lambda self, *args, **kwargs: multiply(self, *args, **kwargs)
Tensor.__rmul__ = lambda self, *args, **kwargs: multiply(self, *args, **kwargs)
Tensor.__truediv__ = lambda self, *args, **kwargs: divide(self, *args, **kwargs)
Tensor.__rtruediv__ = lambda self, *args, **kwargs: rdiv(self, *args, **kwargs)
Tensor.__eq__ = lambda self, *args, **kwargs: eq(self, *args, **kwargs)
Tensor.__ne__ = lambda self, *args, **kwargs: ne(self, *args, **kwargs)
Tensor.__gt__ = lambda self, *args, **kwargs: gt(self, *args, **kwargs)
Tensor.__ge__ = lambda self, *args, **kwargs: ge(self, *args, **kwargs)
Tensor.__lt__ = lambda self, *args, **kwargs: lt(self, *args, **kwargs)
Tensor.__le__ = lambda self, *args, **kwargs: le(self, *args, **kwargs)
Tensor.__getitem__ = lambda self, *args, **kwargs: getitem(self, *args, **kwargs)
Tensor.__matmul__ = lambda self, *args, **kwargs: matmul(self, *args, **kwargs)
Tensor.__hash__ = object.__hash__
