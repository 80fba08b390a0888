from setuptools import find_packages, setup

package_name = 'wam_sim'

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
    description='The MuJoCo tabletop robot and its scripted expert (ROS-free)',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={'console_scripts': ['scripted_expert = wam_sim.scripted_expert:main']},
)
