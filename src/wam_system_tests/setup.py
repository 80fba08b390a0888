from setuptools import find_packages, setup

package_name = 'wam_system_tests'

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
    description='Whole-stack tests and drills: faults, soak, fuzzing, evaluation, the report',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'faults = wam_system_tests.faults:main',
            'soak = wam_system_tests.soak:main',
            'evaluate = wam_system_tests.evaluate:main',
        ]
    },
)
