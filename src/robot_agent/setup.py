from setuptools import find_packages, setup

package_name = 'robot_agent'

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
    description='Synthetic robot source, stack bring-up, agent',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'synthetic_robot = robot_agent.synthetic_robot:main',
            'sim_robot = robot_agent.sim_robot:main',
            'agent = robot_agent.agent_node:main',
            'stack = robot_agent.stack:main',
            'fleet = robot_agent.fleet:main',
        ]
    },
)
