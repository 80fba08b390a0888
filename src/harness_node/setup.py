from setuptools import find_packages, setup

package_name = 'harness_node'

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
    description='Harness: the clamping gate and safety stop, and the task manager (two nodes)',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'harness = harness_node.node:main',
            'task_manager = harness_node.task_node:main',
            'task_managers = harness_node.task_managers:main',
        ]
    },
)
