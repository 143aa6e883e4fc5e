"""Permutation-equivariant actor-critic policies for the ordering and placement agents.

An observation is ``n_items`` rows of ``item_dim`` features (job slots, or servers) followed by
a context vector (the cluster summary, and for placement the job being placed). Every item is
encoded by one shared network; a masked mean and max over the present items ("squeeze") and an
encoding of the context ("communicate") are joined to each item's code, and a shared head scores
it. So permuting the items permutes their logits and leaves the value unchanged. Extra actions
(the ordering agent's "advance") and the value are scored from the pooled summary alone.

Where items may be absent (the ordering agent's job slots: a few of them hold jobs), only the
present items go through the item network and the score head; an absent item is an all-zero row
(as the encoders leave one), so all absent items of an observation share one code and one logit,
computed once per batch. The functions are those of scoring every row; only the work and the last
bits of floating-point sums change with it.

``SlotPolicy`` plugs this into sb3-contrib's ``MaskableActorCriticPolicy``: the scorer is the
policy's ``mlp_extractor`` and emits the logits directly (the usual linear action head, which
would mix items, is replaced by the identity). Its action distribution is sb3-contrib's masked
categorical without ``torch.distributions``' argument checks (:class:`UncheckedCategorical`).
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import MaskableCategorical, MaskableCategoricalDistribution
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from envs.obs import JOB, SERVER

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _mlp(sizes: list[int], activation: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), ACTIVATIONS[activation]()]
    return nn.Sequential(*layers)


class Presence(NamedTuple):
    """Which items of a batch are present: a (B, n) boolean mask, and the observation of each
    present item in row-major order (M,)."""

    present: th.Tensor
    owner: th.Tensor


class SlotScorer(nn.Module):
    """:param n_items: item rows at the start of the observation.
    :param item_dim: features per item.
    :param ctx_dim: features after the items.
    :param extra_actions: actions scored from the summary (after the item actions).
    :param present_index: the item feature that says an item is there (-1: every item is).
    :param hidden: width of every layer.
    :param activation: ``tanh`` or ``relu`` (the same networks; torch's CPU tanh is far slower)."""

    def __init__(
        self,
        n_items: int,
        item_dim: int,
        ctx_dim: int,
        extra_actions: int,
        present_index: int,
        hidden: int = 64,
        activation: str = "tanh",
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
        self.n_items, self.item_dim, self.ctx_dim = n_items, item_dim, ctx_dim
        self.extra, self.present_index = extra_actions, present_index
        self.item = _mlp([item_dim, hidden, hidden], activation)
        self.ctx = _mlp([ctx_dim, hidden], activation)
        # the score head's first layer on [item code, summary], split so the summary's part is
        # computed once per observation rather than once per item (the same function)
        self.score_item = nn.Linear(hidden, hidden)
        self.score_summary = nn.Linear(3 * hidden, hidden, bias=False)
        self.score_out = nn.Sequential(ACTIVATIONS[activation](), nn.Linear(hidden, 1))
        self.extra_head = (
            nn.Sequential(_mlp([3 * hidden, hidden], activation), nn.Linear(hidden, extra_actions))
            if extra_actions
            else None
        )
        self.value = _mlp([3 * hidden, hidden], activation)
        self.latent_dim_pi = n_items + extra_actions
        self.latent_dim_vf = hidden

    def _encode(self, x: th.Tensor) -> tuple[th.Tensor, Presence | None, th.Tensor]:
        """The item codes, which items are present and the summary [mean, max, context] (B, 3h).
        Where every item is present: every item's code (B, n, h), and None. Else the codes of the
        present items only, in row-major order, then the code of an all-zero row (an absent item,
        as the encoder leaves it): (M + 1, h)."""
        b = x.shape[0]
        items = x[:, : self.n_items * self.item_dim].reshape(b, self.n_items, self.item_dim)
        ctx = self.ctx(x[:, self.n_items * self.item_dim :])
        if self.present_index < 0:
            codes = self.item(items)
            return codes, None, th.cat([codes.sum(dim=1) / self.n_items, codes.max(dim=1).values, ctx], dim=-1)
        present = items[..., self.present_index] > 0.5
        where = Presence(present, present.nonzero()[:, 0])
        codes = self.item(th.cat([items[present], items.new_zeros((1, self.item_dim))]))
        own, h = codes[:-1], codes.shape[-1]
        mean = codes.new_zeros((b, h)).index_add(0, where.owner, own)  # (in item order, as a sum over dim 1)
        mean = mean / present.sum(dim=1, keepdim=True).to(codes.dtype).clamp(min=1.0)
        owners = where.owner[:, None].expand(-1, h)
        top = codes.new_zeros((b, h)).scatter_reduce(0, owners, own, "amax", include_self=False)
        return codes, where, th.cat([mean, top, ctx], dim=-1)  # (no item present: mean and max 0)

    def _logits(self, codes: th.Tensor, where: Presence | None, summary: th.Tensor) -> th.Tensor:
        per_obs = self.score_summary(summary)
        if where is None:
            logits = self.score_out(self.score_item(codes) + per_obs.unsqueeze(1)).squeeze(-1)
        else:  # the present items, then every observation's absent items (all-zero rows) at once
            scored = self.score_item(codes)
            out = self.score_out(th.cat([scored[:-1] + per_obs[where.owner], scored[-1:] + per_obs])).squeeze(-1)
            m = where.owner.shape[0]
            logits = out[m:, None].expand(-1, self.n_items).masked_scatter(where.present, out[:m])
        if self.extra_head is not None:
            logits = th.cat([logits, self.extra_head(summary)], dim=-1)
        return logits

    def forward_actor(self, x: th.Tensor) -> th.Tensor:
        return self._logits(*self._encode(x))

    def forward_critic(self, x: th.Tensor) -> th.Tensor:
        return self.value(self._encode(x)[2])

    def forward(self, x: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        codes, where, summary = self._encode(x)  # once for both heads
        return self._logits(codes, where, summary), self.value(summary)


class UncheckedCategorical(MaskableCategoricalDistribution):
    """sb3-contrib's masked categorical, built with ``validate_args=False``: torch then skips the
    checks that the logits are finite and that each action lies in the support, which cost a
    good part of every forward pass of these small networks and change no value (the logits come
    from the network, the actions from the masked distribution or the rollout buffer)."""

    def proba_distribution(self, action_logits: th.Tensor) -> UncheckedCategorical:  # type: ignore[override]
        self.distribution = MaskableCategorical(logits=action_logits.view(-1, self.action_dim), validate_args=False)
        return self


class SlotPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy over item rows. ``policy_kwargs``: ``n_items``, ``item_dim``,
    ``extra_actions``, ``present_index``, ``hidden``, ``activation`` (see :class:`SlotScorer`; saved
    with the model, and a model saved before ``activation`` existed loads as ``tanh``).

    With action masks, :meth:`forward` (the rollouts) and :meth:`evaluate_actions` (the updates)
    compute the masked categorical's log-probabilities, sample and entropy with the very tensor
    operations of sb3-contrib's ``MaskableCategorical`` (so the same values, gradients and random
    draws), without building its distribution objects three times over per call."""

    def __init__(
        self,
        *args: Any,
        n_items: int,
        item_dim: int,
        extra_actions: int = 0,
        present_index: int = -1,
        hidden: int = 64,
        activation: str = "tanh",
        **kwargs: Any,
    ) -> None:
        self.slot_kwargs: dict[str, Any] = dict(
            n_items=n_items,
            item_dim=item_dim,
            extra_actions=extra_actions,
            present_index=present_index,
            hidden=hidden,
            activation=activation,
        )
        super().__init__(*args, **kwargs)
        assert isinstance(self.action_space, spaces.Discrete)
        self.action_dist = UncheckedCategorical(int(self.action_space.n))

    def _build_mlp_extractor(self) -> None:
        ctx = self.features_dim - self.slot_kwargs["n_items"] * self.slot_kwargs["item_dim"]
        self.mlp_extractor = SlotScorer(ctx_dim=ctx, **self.slot_kwargs)  # type: ignore[assignment]

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the scorer's output already is the logits
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(self.slot_kwargs)
        return data

    def _masked(self, obs: th.Tensor, action_masks: Any) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """The log-probabilities of the masked distribution, the value and the masks as booleans.
        As ``MaskableCategorical(logits).apply_masking(masks)``: the logits normalised, the
        masked-out ones set to -1e8 and normalised again."""
        logits, latent_vf = self.mlp_extractor(self.extract_features(obs))
        logits = logits.view(-1, int(self.action_space.n))  # type: ignore[attr-defined]
        logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        masks = th.as_tensor(action_masks, dtype=th.bool, device=logits.device).reshape(logits.shape)
        masked = th.where(masks, logits, th.tensor(-1e8, dtype=logits.dtype, device=logits.device))
        return masked - masked.logsumexp(dim=-1, keepdim=True), self.value_net(latent_vf), masks

    def forward(
        self, obs: th.Tensor, deterministic: bool = False, action_masks: Any = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        if action_masks is None:
            return super().forward(obs, deterministic)
        with th.inference_mode(not th.is_grad_enabled()):  # (the rollouts': no autograd bookkeeping at all)
            log_p, values, _ = self._masked(obs, action_masks)
            probs = th.softmax(log_p, dim=-1)
            actions = th.argmax(probs, dim=1) if deterministic else th.multinomial(probs, 1, True).T.reshape(-1)
            log_prob = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        return actions.reshape((-1, *self.action_space.shape)), values, log_prob  # type: ignore[misc]

    def evaluate_actions(
        self, obs: th.Tensor, actions: th.Tensor, action_masks: th.Tensor | None = None
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        if action_masks is None:
            return super().evaluate_actions(obs, actions)
        log_p, values, masks = self._masked(obs, action_masks)
        log_prob = log_p.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
        p_log_p = th.where(masks, log_p * th.softmax(log_p, dim=-1), th.tensor(0.0, device=log_p.device))
        return values, log_prob, -p_log_p.sum(-1)


def ordering_policy_kwargs(max_jobs: int, hidden: int = 64, activation: str = "tanh") -> dict[str, Any]:
    return dict(
        n_items=max_jobs,
        item_dim=len(JOB),
        extra_actions=1,
        present_index=JOB.col["present"],
        hidden=hidden,
        activation=activation,
    )


def placement_policy_kwargs(num_servers: int, hidden: int = 64, activation: str = "tanh") -> dict[str, Any]:
    return dict(
        n_items=num_servers,
        item_dim=len(SERVER),
        extra_actions=0,
        present_index=-1,
        hidden=hidden,
        activation=activation,
    )


__all__ = ["SlotPolicy", "SlotScorer", "ordering_policy_kwargs", "placement_policy_kwargs"]
