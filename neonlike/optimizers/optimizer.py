"""Optimizers (neon.optimizers.optimizer). `optimize(layer_list, epoch)` updates every parameter
of the layers from its gradient, which the layers accumulated over the minibatch: as neon, the
gradient is divided by the batch size `be.bsz` first. Each update is a few op-tree assignments,
each one fused kernel; optimizer state lives in the layer's `states` list.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import NervanaObject


def get_param_list(layer_list: list) -> list:
    """[((param, grad), states)] of the layers, in order; a layer's get_params() gives a list of
    them or, as neon allowed, one such tuple."""
    out = []
    for layer in layer_list:
        params = layer.get_params()
        out.extend(params) if isinstance(params, list) else out.append(params)
    return out


class Schedule(NervanaObject):
    """Learning rate schedule: lr * change ** steps, where steps counts the entries of step_config
    (a list of epochs) that `epoch` has reached, or epoch // step_config for an int."""

    def __init__(self, step_config: Any = None, change: float = 1.0, name: str | None = None) -> None:
        super().__init__(name)
        if isinstance(step_config, list) and isinstance(change, list):
            raise ValueError("Schedule: with lists of epochs and rates use StepSchedule")
        self.step_config, self.change = step_config, change
        self.steps = 0

    def get_learning_rate(self, learning_rate: float, epoch: int) -> float:
        if isinstance(self.step_config, list):
            self.steps = int(np.sum(epoch >= np.array(self.step_config)))
        elif isinstance(self.step_config, int) and self.step_config > 0:
            self.steps = epoch // self.step_config
        else:
            self.steps = 0
        return float(learning_rate * self.change ** self.steps)


class StepSchedule(Schedule):
    """From each epoch of step_config on, the matching rate of `change` (lists of one length)."""

    def __init__(self, step_config: list, change: list, name: str | None = None) -> None:
        NervanaObject.__init__(self, name)
        if not isinstance(step_config, list) or not isinstance(change, list) or \
                len(step_config) != len(change):
            raise ValueError(f"StepSchedule: step_config and change must be lists of one length, "
                             f"got {step_config!r} and {change!r}")
        self.step_config, self.change = step_config, change
        self.steps = 0

    def get_learning_rate(self, learning_rate: float, epoch: int) -> float:
        passed = [c for s, c in zip(self.step_config, self.change) if epoch >= s]
        return float(passed[-1]) if passed else float(learning_rate)


class PowerSchedule(Schedule):
    """lr * change ** floor(epoch / step_config): the rate times `change` every step_config
    epochs."""

    def __init__(self, step_config: int, change: float, name: str | None = None) -> None:
        if not isinstance(step_config, int) or isinstance(change, list):
            raise ValueError(f"PowerSchedule: step_config must be an int and change a number, "
                             f"got {step_config!r} and {change!r}")
        NervanaObject.__init__(self, name)
        self.step_config, self.change, self.steps = step_config, change, 0

    def get_learning_rate(self, learning_rate: float, epoch: int) -> float:
        self.steps = epoch // self.step_config
        return float(learning_rate * self.change ** self.steps)


class ExpSchedule(Schedule):
    """lr / (1 + decay * epoch)."""

    def __init__(self, decay: float, name: str | None = None) -> None:
        NervanaObject.__init__(self, name)
        self.decay = decay

    def get_learning_rate(self, learning_rate: float, epoch: int) -> float:
        return float(learning_rate / (1.0 + self.decay * epoch))


class PolySchedule(Schedule):
    """lr * (1 - epoch / total_epochs) ** power (neon floored the ratio, which made it lr until
    the last epoch, then 0; the formula its docstring gives is what is computed here)."""

    def __init__(self, total_epochs: int, power: float, name: str | None = None) -> None:
        NervanaObject.__init__(self, name)
        self.total_epochs, self.power = total_epochs, power

    def get_learning_rate(self, learning_rate: float, epoch: int) -> float:
        return float(learning_rate * max(0.0, 1.0 - epoch / self.total_epochs) ** self.power)


class ShiftSchedule(Schedule):
    """The rate halved (shifted right by shift_size bits) every `interval` epochs."""

    def __init__(self, interval: int, shift_size: int = 1, name: str | None = None) -> None:
        NervanaObject.__init__(self, name)
        self.interval, self.shift_size = interval, shift_size

    def get_learning_rate(self, learning_rate: float, epoch: int) -> float:
        return float(learning_rate * 2.0 ** (-self.shift_size * (epoch // self.interval)))


class Optimizer(NervanaObject):
    # how many ranks' gradient sums each gradient holds: neonlike.distributed sets it where the
    # buckets are summed, not averaged, so that the division by the batch folds in the 1/ranks
    grad_sums: int = 1

    def __init__(self, gradient_clip_norm: float | None = None,
                 gradient_clip_value: float | None = None, param_clip_value: float | None = None,
                 name: str | None = None) -> None:
        super().__init__(name)
        self.gradient_clip_norm = gradient_clip_norm
        self.gradient_clip_value = gradient_clip_value
        self.param_clip_value = param_clip_value

    def optimize(self, layer_list: list, epoch: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement optimize")

    # ---------------------------------------------------------------- shared pieces
    def _scale_factor(self, param_list: list) -> float:
        """clip_norm / total gradient norm where that is above clip_norm, else 1 (one host read)."""
        if self.gradient_clip_norm is None:
            return 1.0
        be = self.be
        total = getattr(self, "_sqnorm", None)     # one float64 accumulator, kept
        if total is None:
            total = self._sqnorm = be.empty((1, 1), dtype=np.float64)
        total[:] = 0.0
        for (param, grad), _ in param_list:
            total[:] = total + be.sum(be.square(grad), axis=None)
        norm = math.sqrt(float(total.get()[0, 0])) / (be.bsz * self.grad_sums)
        return self.gradient_clip_norm / max(norm, self.gradient_clip_norm)

    def _grad(self, grad: Any) -> Any:
        """The gradient divided by the batch size (of every rank) and clipped by value (an op-tree)."""
        g = grad * (1.0 / (self.be.bsz * self.grad_sums))
        if self.gradient_clip_value is not None:
            g = self.be.clip(g, -self.gradient_clip_value, self.gradient_clip_value)
        return g

    def _clip_param(self, param: Any) -> None:
        if self.param_clip_value is not None:
            param[:] = self.be.clip(param, -self.param_clip_value, self.param_clip_value)

    def _states(self, states: list, grad: Any, n: int) -> list:
        while len(states) < n:
            states.append(self.be.zeros_like(grad))
        return states

    def get_description(self) -> dict:
        return {"type": type(self).__name__, "config": {k: v for k, v in vars(self).items()
                                                         if k != "name" and not k.startswith("_")
                                                         and not isinstance(v, NervanaObject)}}


class GradientDescentMomentum(Optimizer):
    """v = momentum * v - lr * (g + wdecay * param); param += v (Nesterov: param += momentum * v
    - lr * (g + wdecay * param)). With momentum 0: param -= lr * (g + wdecay * param)."""

    def __init__(self, learning_rate: float, momentum_coef: float = 0.0,
                 stochastic_round: bool = False, wdecay: float = 0.0,
                 gradient_clip_norm: float | None = None, gradient_clip_value: float | None = None,
                 param_clip_value: float | None = None, name: str | None = None,
                 schedule: Schedule | None = None, nesterov: bool = False) -> None:
        super().__init__(gradient_clip_norm, gradient_clip_value, param_clip_value, name)
        self.learning_rate, self.momentum_coef = learning_rate, momentum_coef
        self.wdecay, self.nesterov = wdecay, nesterov
        self.stochastic_round = stochastic_round
        self.schedule = schedule if schedule is not None else Schedule()

    def optimize(self, layer_list: list, epoch: int) -> None:
        lr = self.schedule.get_learning_rate(self.learning_rate, epoch)
        param_list = get_param_list(layer_list)
        scale = self._scale_factor(param_list)
        mom = self.momentum_coef
        for (param, grad), states in param_list:
            g = self._grad(grad)
            step = g * scale + param * self.wdecay if self.wdecay else g * scale
            if mom == 0:
                param[:] = param - step * lr
            else:
                (velocity,) = self._states(states, grad, 1)
                velocity[:] = velocity * mom - step * lr
                if self.nesterov:
                    param[:] = param + velocity * mom - step * lr
                else:
                    param[:] = param + velocity
            self._clip_param(param)


class RMSProp(Optimizer):
    """s = decay * s + (1 - decay) * g^2; param -= lr * g / (sqrt(s + eps) + eps)."""

    def __init__(self, stochastic_round: bool = False, decay_rate: float = 0.95,
                 learning_rate: float = 2e-3, epsilon: float = 1e-6,
                 gradient_clip_norm: float | None = None, gradient_clip_value: float | None = None,
                 param_clip_value: float | None = None, name: str | None = None,
                 schedule: Schedule | None = None) -> None:
        super().__init__(gradient_clip_norm, gradient_clip_value, param_clip_value, name)
        self.decay_rate, self.learning_rate, self.epsilon = decay_rate, learning_rate, epsilon
        self.schedule = schedule if schedule is not None else Schedule()

    def optimize(self, layer_list: list, epoch: int) -> None:
        lr = self.schedule.get_learning_rate(self.learning_rate, epoch)
        param_list = get_param_list(layer_list)
        scale, be, eps = self._scale_factor(param_list), self.be, self.epsilon
        for (param, grad), states in param_list:
            g = self._grad(grad) * scale
            (s,) = self._states(states, grad, 1)
            s[:] = s * self.decay_rate + be.square(g) * (1.0 - self.decay_rate)
            param[:] = param - g * lr / (be.sqrt(s + eps) + eps)
            self._clip_param(param)


class Adagrad(Optimizer):
    """s += g^2; param -= lr * g / sqrt(s + eps) (neon's)."""

    def __init__(self, stochastic_round: bool = False, learning_rate: float = 0.01,
                 epsilon: float = 1e-6, gradient_clip_norm: float | None = None,
                 gradient_clip_value: float | None = None, param_clip_value: float | None = None,
                 name: str | None = None) -> None:
        super().__init__(gradient_clip_norm, gradient_clip_value, param_clip_value, name)
        self.learning_rate, self.epsilon = learning_rate, epsilon

    def optimize(self, layer_list: list, epoch: int) -> None:
        param_list = get_param_list(layer_list)
        scale, be, eps = self._scale_factor(param_list), self.be, self.epsilon
        for (param, grad), states in param_list:
            g = self._grad(grad) * scale
            (s,) = self._states(states, grad, 1)
            s[:] = s + be.square(g)
            param[:] = param - g * self.learning_rate / be.sqrt(s + eps)
            self._clip_param(param)


class Adadelta(Optimizer):
    """Zeiler (2012): Eg = d*Eg + (1-d)*g^2; dx = sqrt((Edx + eps) / (Eg + eps)) * g;
    Edx = d*Edx + (1-d)*dx^2; param -= dx."""

    def __init__(self, stochastic_round: bool = False, decay: float = 0.95, epsilon: float = 1e-6,
                 param_clip_value: float | None = None, name: str | None = None) -> None:
        super().__init__(None, None, param_clip_value, name)
        self.decay, self.epsilon = decay, epsilon

    def optimize(self, layer_list: list, epoch: int) -> None:
        be, d, eps = self.be, self.decay, self.epsilon
        for (param, grad), states in get_param_list(layer_list):
            g = self._grad(grad)
            eg, edx, dx = self._states(states, grad, 3)
            eg[:] = eg * d + be.square(g) * (1.0 - d)
            dx[:] = be.sqrt((edx + eps) / (eg + eps)) * g
            edx[:] = edx * d + be.square(dx) * (1.0 - d)
            param[:] = param - dx
            self._clip_param(param)


class Adam(Optimizer):
    """Kingma and Ba (2014): m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
    param -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps), t counting calls."""

    def __init__(self, stochastic_round: bool = False, learning_rate: float = 0.001,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-8,
                 gradient_clip_norm: float | None = None, gradient_clip_value: float | None = None,
                 param_clip_value: float | None = None, name: str = "adam",
                 schedule: Schedule | None = None) -> None:
        super().__init__(gradient_clip_norm, gradient_clip_value, param_clip_value, name)
        self.learning_rate, self.beta_1, self.beta_2 = learning_rate, beta_1, beta_2
        self.epsilon = epsilon
        self.schedule = schedule if schedule is not None else Schedule()
        self.t = 0

    def optimize(self, layer_list: list, epoch: int) -> None:
        self.t += 1
        b1, b2, be = self.beta_1, self.beta_2, self.be
        lr = self.schedule.get_learning_rate(self.learning_rate, epoch)
        step = lr * math.sqrt(1.0 - b2 ** self.t) / (1.0 - b1 ** self.t)
        param_list = get_param_list(layer_list)
        scale = self._scale_factor(param_list)
        for (param, grad), states in param_list:
            g = self._grad(grad) * scale
            m, v = self._states(states, grad, 2)
            m[:] = m * b1 + g * (1.0 - b1)
            v[:] = v * b2 + be.square(g) * (1.0 - b2)
            param[:] = param - m * step / (be.sqrt(v) + self.epsilon)
            self._clip_param(param)


class ShiftAdaMax(Optimizer):
    """Shift-based AdaMax (Courbariaux et al. 2016, arXiv:1602.02830): m = b1*m + (1-b1)*g,
    v = max(b2*v, |g|), and param -= m / (v + eps) * lr / (1 - b1^t), each product rounded to a
    power of two (be.shift), t = epoch + 1; parameters are clipped to [-1, 1] (binarized
    networks' latent weights)."""

    def __init__(self, stochastic_round: bool = False, learning_rate: float = 0.002,
                 beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-8,
                 schedule: Schedule | None = None, name: str = "ShiftAdaMax") -> None:
        super().__init__(name=name)
        self.stochastic_round, self.learning_rate = stochastic_round, learning_rate
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.schedule = schedule if schedule is not None else Schedule()

    def optimize(self, layer_list: list, epoch: int) -> None:
        be = self.be
        lr = self.schedule.get_learning_rate(self.learning_rate, epoch)
        step = lr / (1.0 - self.beta_1 ** (epoch + 1))
        for (param, grad), states in get_param_list(layer_list):
            g = self._grad(grad)
            m, v, inv_v = self._states(states, grad, 3)
            m[:] = m * self.beta_1 + g * (1.0 - self.beta_1)
            v[:] = be.maximum(v * self.beta_2, be.absolute(g))
            inv_v[:] = 1.0 / (v + self.epsilon)
            shifted = be.shift(m, inv_v)
            param[:] = be.clip(param - be.shift(shifted, step), -1.0, 1.0)


class MultiOptimizer(Optimizer):
    """Different optimizers for different layers: a dict from a layer's class name or its name
    (names win) to an optimizer, with a 'default' entry."""

    def __init__(self, optimizer_mapping: dict, name: str | None = None) -> None:
        super().__init__(name=name)
        if "default" not in optimizer_mapping:
            raise ValueError("MultiOptimizer: optimizer_mapping needs a 'default' entry, got keys "
                             f"{sorted(optimizer_mapping)}")
        self.optimizer_mapping = optimizer_mapping
        self.map_list: dict | None = None     # optimizer -> its layers, of the last layer list
        self._map_lists: dict = {}            # id(layer list) -> (layer list, map_list)

    def _pick(self, layer: Any) -> Any:
        m = self.optimizer_mapping
        return m.get(layer.name) or m.get(type(layer).__name__) or m["default"]

    def optimize(self, layer_list: list, epoch: int) -> None:
        hit = self._map_lists.get(id(layer_list))
        if hit is None or hit[0] is not layer_list:
            groups: dict = {}
            for layer in layer_list:
                groups.setdefault(self._pick(layer), []).append(layer)
            hit = self._map_lists[id(layer_list)] = (layer_list, groups)
        self.map_list = hit[1]
        for opt, layers in self.map_list.items():
            opt.optimize(layers, epoch)
