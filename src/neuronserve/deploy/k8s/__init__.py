"""`neuronserve deploy k8s`: EKS manifests rendered from the plan the container will run (docs/DEPLOY.md,
"EKS"). options.py reads the flags, resources.py sizes a pod, pod.py and objects.py build the objects,
scaling.py the autoscaler, render.py puts them together, yamlout.py writes them out."""
