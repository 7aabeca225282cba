import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("refclipscore.py")
launch_gradio_widget(module)
