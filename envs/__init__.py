"""loangym's RL adapters over the simulator in ``envs.sim``.

Importing this package registers the Gymnasium ids (with the scenario, seed range, trace and
components as keyword arguments to ``gymnasium.make``):

* ``loangym/Ordering-v0``: which waiting job starts next (:class:`envs.ordering.OrderingEnv`);
* ``loangym/Placement-v0``: which servers its workers go to (:class:`envs.placement.PlacementEnv`).

The PettingZoo environment with both agents is :func:`envs.dual.env` / :class:`envs.dual.DualEnv`.
``envs.sim`` itself imports no RL library; this registration is the only place where importing
the package touches Gymnasium.
"""

from gymnasium.envs.registration import register, registry

for _id, _entry in (
    ("loangym/Ordering-v0", "envs.ordering:OrderingEnv"),
    ("loangym/Placement-v0", "envs.placement:PlacementEnv"),
):
    if _id not in registry:
        register(id=_id, entry_point=_entry, disable_env_checker=False)

ENV_IDS = ("loangym/Ordering-v0", "loangym/Placement-v0")
