"""docket serve's web view: the application, its pages, the timeline picture, and the token that guards them."""
