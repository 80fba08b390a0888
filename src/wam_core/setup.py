from setuptools import find_packages, setup

package_name = 'wam_core'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    package_data={'wam_core.common': ['description/*.urdf', 'description/*.yaml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='Mooncake-SG developers',
    maintainer_email='dev@mooncake-sg.invalid',
    description='ROS-free core of Mooncake-SG',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'write_default_models = wam_core.models.default_models:main',
            'check_experts = wam_core.models.check:main',
        ],
        # the shipped experts, registered as any plug-in registers its own
        # (wam_core.models.registry also knows them without installed metadata)
        'wam.world_experts': [
            'vit = wam_core.models.world_expert:WorldExpert',
            'pi0 = wam_core.models.pi0.world:Pi0WorldExpert',
        ],
        'wam.action_experts': [
            'object_mlp = wam_core.models.action_expert:ObjectMlpExpert',
            'pi0 = wam_core.models.pi0.action:Pi0ActionExpert',
        ],
    },
)
