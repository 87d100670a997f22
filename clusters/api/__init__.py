"""REST API of the clusters app: clusters, nodes, node match view, cordon/uncordon."""
