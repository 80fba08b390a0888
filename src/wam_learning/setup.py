from setuptools import find_packages, setup

package_name = 'wam_learning'

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
    description='Datasets, training, DAgger, evaluation and diagnosis of the default model',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
)
