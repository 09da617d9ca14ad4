"""Pure Plotly figure dicts (drawn by static/js/charts.js), one module per page area.

Pure: no Django, no database; the figures take what the selectors return.
"""
