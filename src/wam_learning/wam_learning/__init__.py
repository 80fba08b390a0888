"""The shipped default model's life cycle, without ROS: data, training, evaluation.

``dataset`` records seeded demonstrations of the scripted expert, ``train`` clones
both experts from them, ``dagger`` adds on-policy labels, ``evaluate`` runs the policy
in closed loop without the stack (direct, and the unified baseline), ``diagnose``
scores it phase by phase. May import ``wam_core`` and ``wam_sim``; nothing that
serves models imports this package.
"""
