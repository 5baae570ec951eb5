"""Model service: gradient-boosted scoring on stream and graph features and exact SHAP reason
codes for the deep path."""
