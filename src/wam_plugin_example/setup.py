from setuptools import find_packages, setup

package_name = 'wam_plugin_example'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='Mooncake-SG developers',
    maintainer_email='dev@mooncake-sg.invalid',
    description='Example plug-in experts served through the expert contract',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    # what makes them servable: the model directory's manifest names the type
    entry_points={
        'wam.world_experts': ['example_pooled_cnn = wam_plugin_example.experts:PooledCnnWorld'],
        'wam.action_experts': [
            'example_linear_delta = wam_plugin_example.experts:LinearDeltaAction'
        ],
    },
)
