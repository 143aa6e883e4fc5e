"""loangym's RL adapters over the simulator in ``envs.sim``.

Importing this package registers the Gymnasium ids (with the scenario, seed range, trace and
components as keyword arguments to ``gymnasium.make``):

* ``loangym/Ordering-v1``: which waiting job starts next (:class:`envs.ordering.OrderingEnv`);
* ``loangym/Placement-v1``: which servers its workers go to (:class:`envs.placement.PlacementEnv`).

The ``-v0`` ids (observation layouts 1 to 3) are refused with a sentence naming ``-v1``: their
checkpoints do not fit layout 4. The PettingZoo environment with both agents is
:func:`envs.dual.env` / :class:`envs.dual.DualEnv`. ``envs.sim`` itself imports no RL library;
this registration is the only place where importing the package touches Gymnasium.
"""

from typing import Any

from gymnasium.envs.registration import register, registry

ENV_IDS = ("loangym/Ordering-v1", "loangym/Placement-v1")
RETIRED = {"loangym/Ordering-v0": "loangym/Ordering-v1", "loangym/Placement-v0": "loangym/Placement-v1"}


def _retired(old: str) -> Any:
    def refuse(**kwargs: Any) -> Any:
        raise ValueError(
            f"{old} is observation layout 3, which this version no longer builds; use {RETIRED[old]} "
            "(layout 4), and retrain agents trained on the old id."
        )

    return refuse


for _id, _entry in zip(ENV_IDS, ("envs.ordering:OrderingEnv", "envs.placement:PlacementEnv"), strict=True):
    if _id not in registry:
        register(id=_id, entry_point=_entry, disable_env_checker=False)
for _old in RETIRED:
    if _old not in registry:
        register(id=_old, entry_point=_retired(_old))
